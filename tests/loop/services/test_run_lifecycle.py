"""Runs: start, pause, resume, stop, and the stop rules (budget, plateau, floor)."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from gpu_worker.queues import Task
from loop.models import Candidate, Event, OutboxMessage, Run
from loop.services.evaluations import candidate_record_report
from loop.services.runs import run_advance, run_pause, run_resume, run_stop
from tests.loop.reports import report, shape_result
from tests.loop.services.test_report_recording import submit


def evaluate_all(run, make_report):
    """Dispatch and report every candidate of the run, one worker slot at a time."""
    while True:
        run_advance(run_id=run.pk)
        in_flight = list(run.candidates.filter(status__in=["queued", "running"]))
        if not in_flight:
            return
        for candidate in in_flight:
            candidate_record_report(candidate_id=candidate.pk, attempt=candidate.attempt, worker="w",
                                    report=make_report(candidate))


def test_starting_a_run_needs_the_edit_thesis_permission(make_run, charlie, dana, bob):
    for stranger in (charlie, dana):
        with pytest.raises(PermissionDenied):
            make_run(actor=stranger)
    run = make_run(actor=bob, budget_candidates=3, policy={"threshold": 0.05})
    assert (run.status, run.created_by, run.policy["threshold"]) == ("running", bob, 0.05)
    assert Event.objects.filter(type="run.started", subject_id=str(run.pk)).exists()
    assert OutboxMessage.objects.filter(task=Task.LOOP_ADVANCE, args=[run.pk]).exists()


def test_a_run_refuses_a_bad_policy_and_a_stored_api_key(make_run):
    with pytest.raises(ValidationError):
        make_run(policy={"threshold": 3})
    with pytest.raises(ValidationError):
        make_run(proposer="llm", proposer_settings={"api_key": "sk-secret"})


def test_it_finishes_when_the_candidate_budget_is_spent(make_run, live_worker):
    live_worker()
    run = make_run(budget_candidates=2)
    submit(run, 2)
    evaluate_all(run, lambda c: report(shapes=[shape_result(4, 4096, 1.3)]))
    run.refresh_from_db()
    assert (run.status, run.stop_reason) == ("finished", "budget spent: 2 candidates")
    assert run.finished is not None


def test_it_finishes_when_the_gpu_minutes_are_spent_and_cancels_what_waits(make_run, live_worker):
    live_worker()
    run = make_run(budget_gpu_minutes=0.5)
    _, second = submit(run, 2)
    evaluate_all(run, lambda c: report(seconds=60.0))
    run.refresh_from_db()
    second.refresh_from_db()
    assert run.status == "finished" and run.stop_reason.startswith("budget spent")
    assert "GPU minutes" in run.stop_reason
    assert (second.status, second.reason_code) == ("reverted", "cancelled")


def test_it_finishes_on_a_plateau_of_k_candidates_without_a_keep(make_run, live_worker):
    live_worker()
    run = make_run(policy={"plateau_k": 3})
    submit(run, 4)
    evaluate_all(run, lambda c: report(shapes=[shape_result(4, 4096, 1.3)]))
    run.refresh_from_db()
    assert (run.status, run.stop_reason) == ("finished", "plateau: no kept candidate in the last 3")
    assert list(run.candidates.values_list("status", flat=True)) == ["reverted"] * 3 + ["reverted"]
    assert run.candidates.get(number=4).reason_code == "cancelled"


def test_it_finishes_when_a_kept_candidate_reaches_the_floor(make_run, live_worker):
    live_worker()
    run = make_run(policy={"floor_fraction_stop": 0.8})
    submit(run, 3)
    fractions = iter([0.5, 0.85, 0.9])

    def near_floor(candidate):
        f = next(fractions)
        return report(shapes=[shape_result(4, 4096, 0.7 - 0.1 * (f > 0.6), floor=f)])

    evaluate_all(run, near_floor)
    run.refresh_from_db()
    assert run.status == "finished"
    assert run.stop_reason.startswith("floor reached: candidate 2 runs at 85%")


def test_pause_stops_dispatch_and_resume_restarts_it(make_run, live_worker, bob):
    live_worker()
    run = make_run()
    run_pause(run=run, actor=bob)
    submit(run)
    run_advance(run_id=run.pk)
    assert run.candidates.get().status == "proposed"
    with pytest.raises(ValidationError):
        run_pause(run=run, actor=bob)
    run_resume(run=run, actor=bob)
    run_advance(run_id=run.pk)
    assert run.candidates.get().status == "queued"


def test_stop_is_final_cancels_waiting_candidates_and_still_records_running_ones(make_run, live_worker, alice):
    live_worker()
    run = make_run()
    first, second = submit(run, 2)
    run_advance(run_id=run.pk)
    run_stop(run=run, actor=alice, reason="wrong thesis")
    run.refresh_from_db()
    assert (run.status, run.stop_reason) == ("stopped", "wrong thesis")
    second.refresh_from_db()
    assert second.reason_code == "cancelled"
    first.refresh_from_db()
    candidate_record_report(candidate_id=first.pk, attempt=first.attempt, worker="w", report=report())
    assert Candidate.objects.get(pk=first.pk).status == "kept"
    with pytest.raises(ValidationError):
        run_resume(run=run, actor=alice)
    run_advance(run_id=run.pk)
    assert Run.objects.get(pk=run.pk).status == "stopped"


def test_a_viewer_cannot_pause_or_stop(make_run, charlie):
    run = make_run()
    with pytest.raises(PermissionDenied):
        run_pause(run=run, actor=charlie)
    with pytest.raises(PermissionDenied):
        run_stop(run=run, actor=charlie)


def test_advancing_a_run_twice_changes_nothing_the_second_time(make_run, live_worker):
    live_worker()
    run = make_run()
    submit(run, n=2)
    first = run_advance(run_id=run.pk)
    state = sorted(run.candidates.values_list("number", "status", "attempt"))
    messages, events = OutboxMessage.objects.count(), Event.objects.count()
    second = run_advance(run_id=run.pk)
    assert first["dispatched"] == 1 and second["dispatched"] == 0  # one worker: one in flight, one waits
    assert sorted(run.candidates.values_list("number", "status", "attempt")) == state
    assert (OutboxMessage.objects.count(), Event.objects.count()) == (messages, events)


def test_a_heartbeat_advances_runs_only_when_its_worker_comes_alive(make_run, monkeypatch):
    import time

    from loop import tasks

    run = make_run()
    submit(run)
    advanced = []
    monkeypatch.setattr(tasks, "run_advance", lambda *, run_id: advanced.append(run_id))
    beat = {"name": "gpu-0", "hardware": run.hardware, "sent_at": time.time(), "running": []}
    tasks.heartbeat(beat)
    tasks.heartbeat(dict(beat, sent_at=time.time()))
    assert advanced == [run.pk]  # the first beat brought capacity; the second is only a heartbeat
