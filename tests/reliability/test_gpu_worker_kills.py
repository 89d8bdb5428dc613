"""A GPU worker killed with SIGKILL in every stage of an evaluation, again and again, then restarted:
every candidate ends in a final state, none is lost, none is decided twice, every report is counted
once, no sandboxed child outlives its worker, and the run finishes (the reaper, run by the loop
worker's beat, re-queues what a dead worker held)."""

import os
import socket

import pytest

from loop.models import Candidate, Evaluation, Event, Run
from tests.conftest import wait_until
from tests.reliability.conftest import assert_run_consistent, live_children, wait_finished

# When to kill, keyed on what the worker was last seen doing (its log, then the stage progress the
# loop recorded; the database trails the worker by a message, so a kill lands at or after it).
STAGES = ("received", "guard", "verify", "after_verify", "idle")


def _worker_name(proc) -> str:
    return f"{socket.gethostname()}:{proc.popen.pid}"


def _moment(stage: str, run: Run, proc, evaluations_before: int):
    """A predicate that is true when `proc` is in `stage`; returns what it saw."""
    mine = Candidate.objects.filter(run=run, worker=_worker_name(proc), status="running")

    def seen():
        if stage == "received":
            return "received" if "gpu.evaluate[" in proc.output() and " received" in proc.output() else None
        if stage == "guard":
            c = mine.filter(stage__startswith="guard:").first()
        elif stage == "verify":
            c = mine.filter(stage="verify:running").first()
        elif stage == "after_verify":
            c = mine.exclude(stage__startswith="guard:").exclude(stage="verify:running").first()
        else:  # idle: a report was just recorded; the worker is between candidates
            return "idle" if Evaluation.objects.filter(candidate__run=run).count() > evaluations_before else None
        return f"{c.number}:{c.stage}" if c else None

    return seen


def _kill_through_the_stages(run, start_gpu_worker, kills: int):
    proc = start_gpu_worker()
    done = []
    for i in range(kills):
        stage = STAGES[i % len(STAGES)]
        before = Evaluation.objects.filter(candidate__run=run).count()
        seen = _moment(stage, run, proc, before)

        def ready(seen=seen):
            if Run.objects.filter(pk=run.pk, status="finished").exists():
                return "finished"
            return seen()

        what = wait_until(ready, timeout_s=120, interval_s=0.05)
        if what == "finished":
            break
        proc.kill(9)
        done.append((stage, what))
        # The sandboxed child dies with its worker (PR_SET_PDEATHSIG), whatever it was doing.
        wait_until(lambda: not live_children(start_gpu_worker.scratch), timeout_s=20)
        proc = start_gpu_worker()
    return done


def _check(run, n, kills_done):
    finished = wait_finished(run, timeout_s=300)
    candidates = assert_run_consistent(finished, expect_candidates=n)
    assert kills_done, "no kill happened: the test proved nothing"
    requeued = Event.objects.filter(run_id=run.pk, type="candidate.requeued").count()
    lost = [c for c in candidates if c.attempt > 1]
    # A kill that found the worker holding a candidate costs that candidate an attempt, never the candidate.
    assert requeued >= len(lost) and sum(c.attempt - 1 for c in candidates) == requeued
    return candidates


def test_sigkill_in_every_stage_loses_nothing(start_loop_worker, start_gpu_worker, human_run):
    start_loop_worker()
    run = human_run(4)
    kills = _kill_through_the_stages(run, start_gpu_worker, kills=len(STAGES))
    candidates = _check(run, 4, kills)
    # At least one kill hit a candidate mid-evaluation, and that candidate was evaluated again.
    assert any(c.attempt > 1 for c in candidates), kills
    print("kills:", kills)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("ARK_FAULTS_LONG"), reason="the long form (about 5 minutes): ARK_FAULTS_LONG=1")
def test_twenty_sigkills_over_a_run_lose_nothing(start_loop_worker, start_gpu_worker, human_run):
    start_loop_worker()
    run = human_run(10, max_attempts=4)
    kills = _kill_through_the_stages(run, start_gpu_worker, kills=20)
    candidates = _check(run, 10, kills)
    assert len(kills) >= 15 and any(c.attempt > 1 for c in candidates), kills
    print("kills:", kills)
