"""Independent re-timing before promotion (issue 20; docs/keep-rule.md, What blocks a promotion): a GPU-timed
candidate is promoted only after a re-timing the loop judged confirmed from the worker's numbers; a CPU one
goes through marked 'not confirmable on cpu'."""

import pytest
from django.core.exceptions import ValidationError

from gpu_worker.pipeline.retime_run import child_times
from gpu_worker.pipeline.sandbox import ChildRun
from gpu_worker.queues import Task
from loop.models import Candidate, Confirmation, Event, OutboxMessage
from loop.services.confirmations import confirmation_request, confirmation_summary
from loop.services.deployments import NotConfirmed, deployment_promote
from loop.tasks import retimed as retimed_task
from tests.loop.services.test_deployments import BEST, kept

pytestmark = pytest.mark.retiming
ROUTES = [(0, 65536)]


@pytest.fixture(autouse=True)
def export_dir(settings, tmp_path):
    settings.SERVING_EXPORT_DIR = tmp_path / "serving"


def measured(report: dict, factor: float = 1.0) -> dict:
    """What a worker re-timing the report's shapes sends: the default at 50 us, the candidate at the report's
    ratio times `factor` (1.0: agreeing; 1.5: the candidate is half again slower than the report said)."""
    rows = []
    for s in report["stages"]["benchmark"]["shapes"]:
        ratio = s["candidate"]["median_us"] / s["default_median_us"]
        rows.append({"shape": s["shape"], "candidate_us": 50.0 * ratio * factor, "default_us": 50.0})
    return {"status": "measured", "timer": "triton.do_bench_cudagraph", "shapes": rows, "findings": []}


def requested(candidate, actor) -> Confirmation:
    confirmation = confirmation_request(actor=actor, candidate=candidate)
    message = OutboxMessage.objects.get(task=Task.GPU_RETIME)
    assert message.queue == "gpu.h200" and message.args[0]["confirmation_id"] == confirmation.pk
    assert message.args[0]["source"] == candidate.source
    return confirmation


def test_a_gpu_candidate_is_promoted_only_after_a_confirming_retiming(make_run, live_worker, bob, dana):
    live_worker(name="gpu-2")  # alive besides gpu-1, which made the report: the re-timing avoids gpu-1
    candidate = kept(make_run(), BEST, author=bob)
    with pytest.raises(NotConfirmed, match="no independent re-timing"):
        deployment_promote(actor=dana, candidate=candidate, routes=ROUTES)
    assert confirmation_summary(candidate)["can_request"]
    confirmation = requested(candidate, dana)
    assert OutboxMessage.objects.get(task=Task.GPU_RETIME).args[0]["avoid_worker"] == "gpu-1"
    with pytest.raises(NotConfirmed):  # queued is not confirmed
        deployment_promote(actor=dana, candidate=candidate, routes=ROUTES)
    retimed_task(confirmation.pk, "gpu-2", measured(candidate.evaluations.get().report))
    confirmation.refresh_from_db()
    assert confirmation.status == "confirmed" and confirmation.worker == "gpu-2"
    summary = confirmation_summary(candidate)["text"]
    assert summary.startswith("confirmed by an independent re-timing on gpu-2: ratio 0.6")
    config = deployment_promote(actor=dana, candidate=candidate, routes=ROUTES)
    assert config.version == 1
    event = Event.objects.get(type="serving.promoted")
    assert event.payload["retiming"] == "re-timing confirmed the recorded speed-up"
    assert Event.objects.filter(type="candidate.retime_confirmed", actor="gpu-2").exists()


def test_a_retiming_that_disagrees_beyond_noise_blocks_the_promotion(make_run, live_worker, bob, dana):
    live_worker()
    candidate = kept(make_run(), BEST, author=bob)
    confirmation = requested(candidate, dana)
    retimed_task(confirmation.pk, "gpu-1", measured(candidate.evaluations.get().report, factor=1.5))
    confirmation.refresh_from_db()
    assert confirmation.status == "unconfirmed"
    with pytest.raises(NotConfirmed, match=r"bench:unconfirmed: .* the report says 0\.600x the default's time, "
                                           r"triton\.do_bench_cudagraph measured 0\.900x"):
        deployment_promote(actor=dana, candidate=candidate, routes=ROUTES)
    text = confirmation_summary(candidate)["text"]
    assert text.startswith("unconfirmed by the re-timing on gpu-1 (the worker that made the report")
    # within noise (5% slower) confirms: the rule does not block on timer jitter
    again = requested_again(candidate, dana)
    retimed_task(again.pk, "gpu-1", measured(candidate.evaluations.get().report, factor=1.05))
    assert deployment_promote(actor=dana, candidate=candidate, routes=ROUTES).version == 1


def requested_again(candidate, actor) -> Confirmation:
    return confirmation_request(actor=actor, candidate=candidate)


def test_the_verdict_is_computed_by_the_loop_not_taken_from_the_worker_message(make_run, live_worker, bob, dana):
    """A message that says 'confirmed' but carries times 1.5x slower than the report is unconfirmed; harness
    findings (a tampering child) make even agreeing numbers unconfirmed; a second answer changes nothing."""
    live_worker()
    candidate = kept(make_run(), BEST, author=bob)
    report = candidate.evaluations.get().report
    forged = {**measured(report, factor=1.5), "verdict": "confirmed", "result": {"status": "confirmed"}}
    confirmation = requested(candidate, dana)
    retimed_task(confirmation.pk, "gpu-1", forged)
    retimed_task(confirmation.pk, "gpu-1", measured(report))  # too late: the first answer stands
    confirmation.refresh_from_db()
    assert confirmation.status == "unconfirmed"
    tampered = requested_again(candidate, dana)
    retimed_task(tampered.pk, "gpu-1", {**measured(report), "findings": [
        {"code": "bench:unconfirmed", "message": "re-timing the candidate: the child reported guard:tamper"}]})
    tampered.refresh_from_db()
    assert tampered.status == "unconfirmed"
    assert "guard:tamper" in tampered.result["findings"][0]["message"]
    with pytest.raises(NotConfirmed):
        deployment_promote(actor=dana, candidate=candidate, routes=ROUTES)


def test_a_child_cannot_send_a_verdict_or_times_its_wall_clock_does_not_cover():
    """The worker's parent keeps only well-formed `retimed` numbers; a forged verdict message is ignored, and a
    child that claims more timing than it lived, or lived less than its timer needs, is a finding."""
    honest = ChildRun(messages=[{"type": "load", "status": "pass"},
                                {"type": "retimed", "index": 0, "us": 12.5, "wall_s": 1.1},
                                {"type": "done"}], returncode=0, wall_s=3.0)
    assert child_times(honest, 1, "candidate") == ({0: 12.5}, [])
    forged = ChildRun(messages=[{"type": "load", "status": "pass"},
                                {"type": "confirmation", "status": "confirmed"},
                                {"type": "retimed", "index": 0, "us": 1.0, "wall_s": 9.0},
                                {"type": "retimed", "index": 0, "us": 0.5, "wall_s": 0.1},
                                {"type": "retimed", "index": 1, "us": float("nan"), "wall_s": 0.1},
                                {"type": "done"}], returncode=0, wall_s=3.0)
    times, findings = child_times(forged, 2, "candidate")
    assert times == {0: 1.0}
    text = " | ".join(f["message"] for f in findings)
    assert "malformed or repeated" in text and "its timing took 9.00 s, but it lived 3.00 s" in text
    hasty = ChildRun(messages=[{"type": "retimed", "index": i, "us": 5.0, "wall_s": 0.001} for i in range(40)]
                     + [{"type": "done"}], returncode=0, wall_s=0.5)
    assert "less than the 4.0 s its timer needs" in child_times(hasty, 40, "candidate")[1][0]["message"]


def test_a_cpu_candidate_is_promoted_marked_not_confirmable(make_run, live_worker, bob, dana):
    """A CPU-only setup verifies without timing; whatever keeps such a candidate, its promotion has nothing
    to confirm and says so."""
    from loop.services.candidates import candidate_submit
    from loop.services.evaluations import candidate_record_report
    from loop.services.runs import run_advance
    from tests.loop.reports import cpu_report

    live_worker()
    run = make_run()
    candidate = candidate_submit(run=run, source=BEST, proposer="human", author=bob)
    run_advance(run_id=run.pk)
    candidate.refresh_from_db()
    candidate_record_report(candidate_id=candidate.pk, attempt=candidate.attempt, worker="cpu", report=cpu_report())
    Candidate.objects.filter(pk=candidate.pk).update(status="kept")
    assert confirmation_summary(candidate) == {"status": "cpu", "text": "not confirmable on cpu", "can_request": False}
    with pytest.raises(ValidationError, match="not confirmable on cpu"):
        confirmation_request(actor=dana, candidate=candidate)
    deployment_promote(actor=dana, candidate=candidate, routes=ROUTES)
    assert Event.objects.get(type="serving.promoted").payload["retiming"] == "not confirmable on cpu"
