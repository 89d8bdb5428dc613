"""Dispatch, progress and report recording: idempotent, fenced by attempt, policy applied once."""

import itertools

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from gpu_worker.queues import Task
from loop.models import Candidate, Decision, Evaluation, Event, OutboxMessage, Run
from loop.services.candidates import candidate_record_progress, candidate_submit
from loop.services.decisions import candidate_approve, candidate_veto
from loop.services.evaluations import candidate_record_report
from loop.services.runs import run_advance
from tests.loop.reports import cpu_report, report, shape_result
from tests.loop.services.test_candidate_submit import GOOD

_variants = itertools.count()


def submit(run, n=1):
    return [candidate_submit(run=run, source=GOOD + f"\n# variant {next(_variants)}\n", proposer="human")
            for _ in range(n)]


def gpu_messages():
    return list(OutboxMessage.objects.filter(task=Task.GPU_EVALUATE).order_by("id"))


def queued(make_run, live_worker, **kw):
    live_worker()
    run = make_run(**kw)
    (candidate,) = submit(run)
    run_advance(run_id=run.pk)
    candidate.refresh_from_db()
    return run, candidate


def test_dispatch_queues_through_the_outbox_with_the_evaluation_spec(make_run, live_worker):
    _, candidate = queued(make_run, live_worker)
    assert (candidate.status, candidate.attempt) == ("queued", 1)
    (message,) = gpu_messages()
    assert message.queue == "gpu.h200"
    spec = message.args[0]
    assert spec["candidate_id"] == candidate.pk and spec["attempt"] == 1 and spec["source"] == candidate.source
    assert spec["target"] == "dsa_topk" and spec["incumbent_source"] is None and spec["profile"] == "smoke"


def test_as_many_candidates_are_in_flight_as_there_are_live_workers(make_run, live_worker):
    live_worker(), live_worker()
    live_worker(hardware="b200")
    run = make_run()
    first, _, third = submit(run, 3)
    run_advance(run_id=run.pk)
    assert list(run.candidates.values_list("status", flat=True)) == ["queued", "queued", "proposed"]
    candidate_record_report(candidate_id=first.pk, attempt=1, worker="w", report=report(candidate_id=first.pk))
    run_advance(run_id=run.pk)
    third.refresh_from_db()
    assert third.status == "queued"


def test_no_live_worker_means_nothing_is_dispatched(make_run, live_worker):
    from django.utils import timezone

    stale = live_worker()
    stale.last_heartbeat = timezone.now() - timezone.timedelta(hours=1)
    stale.save()
    run = make_run()
    submit(run)
    run_advance(run_id=run.pk)
    assert run.candidates.get().status == "proposed" and not gpu_messages()


def test_a_report_keeps_the_candidate_and_makes_it_the_incumbent(make_run, live_worker):
    run, candidate = queued(make_run, live_worker)
    evaluation = candidate_record_report(candidate_id=candidate.pk, attempt=1, worker="gpu-1",
                                         report=report(candidate_id=candidate.pk))
    candidate.refresh_from_db()
    run.refresh_from_db()
    assert (candidate.status, candidate.reason_code) == ("kept", "faster")
    assert run.incumbent == candidate
    assert evaluation.geomean_speedup > 1 and run.gpu_seconds_used == evaluation.gpu_seconds > 0
    assert [d.verdict for d in candidate.decisions.all()] == ["keep"]
    assert [e.type for e in Event.objects.filter(subject_id=str(candidate.pk), subject_type="candidate")] == [
        "candidate.proposed", "candidate.queued", "candidate.reported", "candidate.kept"]


def test_the_same_report_twice_is_recorded_once(make_run, live_worker):
    run, candidate = queued(make_run, live_worker)
    first = candidate_record_report(candidate_id=candidate.pk, attempt=1, worker="gpu-1", report=report())
    events = Event.objects.count()
    assert candidate_record_report(candidate_id=candidate.pk, attempt=1, worker="gpu-1", report=report()) is None
    run.refresh_from_db()
    assert Evaluation.objects.filter(candidate=candidate).count() == 1
    assert Decision.objects.filter(candidate=candidate).count() == 1
    assert run.gpu_seconds_used == first.gpu_seconds
    assert Event.objects.count() == events


def test_a_late_report_from_a_dead_attempt_changes_nothing(make_run, live_worker):
    _, candidate = queued(make_run, live_worker)
    Candidate.objects.filter(pk=candidate.pk).update(attempt=2)  # the reaper moved it on
    assert candidate_record_report(candidate_id=candidate.pk, attempt=1, worker="dead", report=report()) is None
    assert not candidate_record_progress(candidate_id=candidate.pk, attempt=1, worker="dead", stage="verify",
                                         status="start")
    candidate.refresh_from_db()
    assert (candidate.status, candidate.worker) == ("queued", "")
    assert not Evaluation.objects.exists()


def test_progress_marks_the_stage_once_and_renews_the_lease(make_run, live_worker):
    _, candidate = queued(make_run, live_worker)
    assert candidate_record_progress(candidate_id=candidate.pk, attempt=1, worker="gpu-1", stage="verify",
                                     status="start", detail={"shapes": 4})
    assert not candidate_record_progress(candidate_id=candidate.pk, attempt=1, worker="gpu-1", stage="verify",
                                         status="start", detail={"shapes": 4})
    candidate.refresh_from_db()
    assert (candidate.status, candidate.stage, candidate.worker) == ("running", "verify:start", "gpu-1")
    assert candidate.lease_expires is not None
    assert Event.objects.filter(type="candidate.stage").count() == 1


def test_a_cpu_mode_report_reverts_as_unmeasured_and_the_run_says_so(make_run, live_worker):
    run, candidate = queued(make_run, live_worker)
    candidate_record_report(candidate_id=candidate.pk, attempt=1, worker="cpu-1", report=cpu_report())
    candidate.refresh_from_db()
    run.refresh_from_db()
    assert (candidate.status, candidate.reason_code) == ("reverted", "unmeasured")
    assert "timings need a GPU worker" in run.notice
    assert run.incumbent is None


def test_an_unjudgeable_report_ends_in_error(make_run, live_worker):
    _, candidate = queued(make_run, live_worker)
    candidate_record_report(candidate_id=candidate.pk, attempt=1, worker="gpu-1", report={"schema": "garbage"})
    candidate.refresh_from_db()
    assert (candidate.status, candidate.reason_code) == ("error", "error")
    assert Evaluation.objects.get(candidate=candidate).report == {"schema": "garbage"}


def test_a_keep_measured_against_an_outdated_incumbent_is_measured_again(make_run, live_worker):
    live_worker()
    run, first = queued(make_run, live_worker)
    (second,) = submit(run)
    run_advance(run_id=run.pk)
    second.refresh_from_db()
    assert second.status == "queued"
    candidate_record_report(candidate_id=first.pk, attempt=1, worker="a", report=report())
    candidate_record_report(candidate_id=second.pk, attempt=1, worker="b", report=report())
    second.refresh_from_db()
    assert (second.status, second.attempt) == ("proposed", 1)
    assert Event.objects.filter(type="candidate.remeasure", subject_id=str(second.pk)).exists()
    run_advance(run_id=run.pk)
    spec = gpu_messages()[-1].args[0]
    assert (spec["candidate_id"], spec["attempt"], spec["incumbent_id"]) == (second.pk, 2, first.pk)
    assert spec["incumbent_source"] == first.source


def test_in_gate_mode_a_passing_candidate_waits_for_review(make_run, live_worker, bob):
    run, candidate = queued(make_run, live_worker, review_mode="gate")
    candidate_record_report(candidate_id=candidate.pk, attempt=1, worker="gpu-1", report=report())
    candidate.refresh_from_db()
    assert candidate.status == "awaiting_review"
    decision = candidate_approve(candidate=candidate, actor=bob, note="read the diff")
    candidate.refresh_from_db()
    run.refresh_from_db()
    assert (candidate.status, decision.verdict, decision.user) == ("kept", "approve", bob)
    assert run.incumbent == candidate
    assert Event.objects.get(type="candidate.approved", subject_id=str(candidate.pk)).actor == "bob"
    with pytest.raises(ValidationError, match="not awaiting review"):
        candidate_approve(candidate=candidate, actor=bob)


def test_a_veto_reverts_with_the_reviewers_reason(make_run, live_worker, alice):
    run, candidate = queued(make_run, live_worker, review_mode="gate")
    candidate_record_report(candidate_id=candidate.pk, attempt=1, worker="gpu-1", report=report())
    with pytest.raises(ValidationError):
        candidate_veto(candidate=candidate, actor=alice, reason="  ")
    candidate_veto(candidate=candidate, actor=alice, reason="special-cases n_ctx=131072")
    candidate.refresh_from_db()
    assert (candidate.status, candidate.reason_code, candidate.reason_text) == (
        "vetoed", "vetoed", "special-cases n_ctx=131072")
    assert Event.objects.get(type="candidate.vetoed", subject_id=str(candidate.pk)).actor == "alice"
    assert Run.objects.get(pk=run.pk).incumbent is None


def test_a_viewer_can_neither_approve_nor_veto(make_run, live_worker, charlie, dana):
    _, candidate = queued(make_run, live_worker, review_mode="gate")
    candidate_record_report(candidate_id=candidate.pk, attempt=1, worker="gpu-1", report=report())
    for actor in (charlie, dana):
        with pytest.raises(PermissionDenied):
            candidate_approve(candidate=candidate, actor=actor)
        with pytest.raises(PermissionDenied):
            candidate_veto(candidate=candidate, actor=actor, reason="no")
    assert Candidate.objects.get(pk=candidate.pk).status == "awaiting_review"


def test_a_slower_candidate_in_gate_mode_is_reverted_without_review(make_run, live_worker):
    _, candidate = queued(make_run, live_worker, review_mode="gate")
    slow = report(shapes=[shape_result(4, 32768, 1.2)])
    candidate_record_report(candidate_id=candidate.pk, attempt=1, worker="gpu-1", report=slow)
    assert Candidate.objects.get(pk=candidate.pk).reason_code == "slower"


def test_a_report_with_numbers_the_database_cannot_hold_is_stored_and_judged(make_run, live_worker):
    run, candidate = queued(make_run, live_worker)
    odd = report()
    odd["stages"]["benchmark"]["shapes"][0]["ratio"] = float("nan")
    odd["summary"]["geomean_speedup"] = 10 ** 400
    odd["wall_s"] = float("inf")
    evaluation = candidate_record_report(candidate_id=candidate.pk, attempt=1, worker="gpu-1", report=odd)
    evaluation.refresh_from_db()
    assert evaluation.report["stages"]["benchmark"]["shapes"][0]["ratio"] is None
    assert evaluation.geomean_speedup is None
    assert Candidate.objects.get(pk=candidate.pk).status == "error"
    assert Run.objects.get(pk=run.pk).gpu_seconds_used == evaluation.gpu_seconds < 1000
