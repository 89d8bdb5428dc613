"""Runs: start, pause, resume, stop, and `run_advance`, the step that applies the stop rules,
dispatches proposed candidates to free GPU workers and asks the proposer for more.

`run_advance` is the one way a run moves on. It is safe to call any number of times: it works under
the run's row lock and every change it makes is conditional, so a second call finds nothing to do.
It is called where a run's state really changes: a report recorded (a slot is free, a candidate
decided), a proposal made, and by the reaper after it requeues a candidate. A change made inside a
service's transaction asks for it through `run_advance_soon` (an outbox message, sent on commit):
start and resume, a reviewer's decision, a person's submission, a GPU worker coming alive.

As many candidates are in flight as there are live GPU workers of the run's hardware. Stop rules:
budget spent (candidates or GPU minutes), plateau (no kept candidate among the last K decided), the
floor reached (a kept candidate at the configured fraction of the roofline), or a proposer with
nothing left to try.

Asking the proposer itself is loop.proposers.propose_next: the proposers build on this module, never
the other way round.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from gpu_worker.queues import LOOP_QUEUE, Task
from loop.audit import event_write
from loop.hardware import hardware_slug
from loop.models import Candidate, Evaluation, Run, Thesis, Worker
from loop.policy import RunPolicy
from loop.proposer_config import llm_preflight, proposer_settings_clean
from loop.roles import EDIT_THESIS, check_permission
from loop.services.candidates import IN_FLIGHT, candidate_cancel_unstarted, candidate_dispatch
from loop.services.outbox import outbox_enqueue

log = logging.getLogger(__name__)

DECIDED = (Candidate.Status.KEPT, Candidate.Status.REVERTED, Candidate.Status.VETOED, Candidate.Status.ERROR,
           Candidate.Status.AWAITING_REVIEW)


def run_advance_soon(run_id: int) -> None:
    """Ask for `run_advance` once the caller's transaction commits (an outbox message on the loop queue)."""
    outbox_enqueue(task=Task.LOOP_ADVANCE, queue=LOOP_QUEUE, args=[run_id])


def live_workers(hardware: str):
    deadline = timezone.now() - timedelta(seconds=settings.ARK_HEARTBEAT_TIMEOUT_S)
    return Worker.objects.filter(hardware=hardware, last_heartbeat__gte=deadline)


def run_start(*, actor, thesis: Thesis, proposer: str, hardware: str | None = None, budget_candidates: int = 20,
              budget_gpu_minutes: float = 60.0, review_mode: str = Run.ReviewMode.AUTO, policy: dict | None = None,
              proposer_settings: dict | None = None, profile: str = "smoke") -> Run:
    check_permission(actor, EDIT_THESIS)
    if proposer not in Run.Proposer.values:
        raise ValidationError(f"unknown proposer {proposer!r}; one of {', '.join(Run.Proposer.values)}")
    if review_mode not in Run.ReviewMode.values:
        raise ValidationError(f"unknown review mode {review_mode!r}")
    if budget_candidates < 1 or budget_gpu_minutes <= 0:
        raise ValidationError("a run needs a budget of at least one candidate and some GPU minutes")
    try:
        policy_json = RunPolicy.from_json(policy).to_json()
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"bad policy: {exc}") from exc
    # Person-supplied: a strict schema per proposer, the hardware a slug, an LLM endpoint that answers
    # (docs/security.md). The preflight runs before the run exists: a misconfiguration spends nothing.
    proposer_settings = proposer_settings_clean(proposer, proposer_settings)
    hardware = hardware_slug(hardware or thesis.hardware)
    if proposer == Run.Proposer.LLM:
        llm_preflight(proposer_settings)
    with transaction.atomic():
        run = Run.objects.create(
            thesis=thesis, hardware=hardware or thesis.hardware, proposer=proposer,
            proposer_settings=proposer_settings or {}, profile=profile, budget_candidates=budget_candidates,
            budget_gpu_minutes=budget_gpu_minutes, policy=policy_json, review_mode=review_mode, created_by=actor,
        )
        event_write(type="run.started", actor=actor, subject=run, run_id=run.pk, payload={
            "thesis": thesis.pk, "hardware": run.hardware, "proposer": proposer, "review_mode": review_mode,
            "budget_candidates": budget_candidates, "budget_gpu_minutes": budget_gpu_minutes, "policy": policy_json})
        run_advance_soon(run.pk)
    return run


def _transition(*, run: Run, actor, frm: tuple, to: str, event: str, reason: str = "") -> Run:
    check_permission(actor, EDIT_THESIS)
    with transaction.atomic():
        fields = {"status": to}
        if to == Run.Status.RUNNING:
            fields["stop_reason"] = ""  # a pause's reason (run_hold) no longer holds
        if to == Run.Status.STOPPED:
            fields.update(stop_reason=reason or f"stopped by {actor.get_username()}", finished=timezone.now())
        if not Run.objects.filter(pk=run.pk, status__in=frm).update(**fields):
            current = Run.objects.get(pk=run.pk).status
            raise ValidationError(f"run {run.pk} is {current}; it cannot become {to}")
        run.refresh_from_db()
        if to == Run.Status.STOPPED:
            candidate_cancel_unstarted(run=run, why="the run was stopped")
        event_write(type=event, actor=actor, subject=run, run_id=run.pk, payload={"status": to, "reason": reason})
        if to == Run.Status.RUNNING:
            run_advance_soon(run.pk)
    return run


def run_pause(*, run: Run, actor) -> Run:
    """Nothing new is dispatched or proposed; what is in flight finishes and is recorded."""
    return _transition(run=run, actor=actor, frm=(Run.Status.RUNNING,), to=Run.Status.PAUSED, event="run.paused")


def run_resume(*, run: Run, actor) -> Run:
    return _transition(run=run, actor=actor, frm=(Run.Status.PAUSED,), to=Run.Status.RUNNING, event="run.resumed")


def run_hold(*, run: Run, reason: str) -> bool:
    """The loop pauses a running run whose proposer cannot work (an LLM endpoint that fails its preflight):
    nothing is spent until a person fixes the configuration and resumes it."""
    with transaction.atomic():
        # The reason shows on the run page until a person resumes it (which clears it).
        if not Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(
                status=Run.Status.PAUSED, stop_reason=f"paused by the loop: {reason}"[:200]):
            return False
        event_write(type="run.paused", actor="loop", subject=run, run_id=run.pk,
                    payload={"status": Run.Status.PAUSED, "reason": reason[:1000]})
    return True


def run_stop(*, run: Run, actor, reason: str = "") -> Run:
    """Final: proposed candidates are cancelled; queued and running ones still report."""
    return _transition(run=run, actor=actor, frm=(Run.Status.RUNNING, Run.Status.PAUSED), to=Run.Status.STOPPED,
                       event="run.stopped", reason=reason)


def _budget_state(run: Run) -> dict:
    counts = {status: 0 for status in Candidate.Status.values}
    for status in run.candidates.values_list("status", flat=True):
        counts[status] += 1
    return {
        "total": sum(counts.values()),
        "proposed": counts[Candidate.Status.PROPOSED],
        "in_flight": sum(counts[s] for s in IN_FLIGHT),
        "candidates_spent": sum(counts.values()) >= run.budget_candidates,
        "gpu_spent": run.gpu_seconds_used >= run.budget_gpu_minutes * 60.0,
    }


def stop_reason(run: Run, state: dict | None = None) -> str:
    """Why the run should finish now, or "" (the stop rules, in order)."""
    state = state or _budget_state(run)
    policy = RunPolicy.from_json(run.policy)
    idle = state["in_flight"] == 0 and state["proposed"] == 0
    if state["candidates_spent"] and idle:
        return f"budget spent: {run.budget_candidates} candidates"
    if state["gpu_spent"] and state["in_flight"] == 0:
        return f"budget spent: {run.gpu_seconds_used / 60:.1f} of {run.budget_gpu_minutes:g} GPU minutes"
    if policy.floor_fraction_stop is not None:
        best = (Evaluation.objects.filter(candidate__run=run, candidate__status=Candidate.Status.KEPT,
                                          floor_fraction__gte=policy.floor_fraction_stop)
                .select_related("candidate").order_by("-floor_fraction").first())
        if best is not None:
            return (f"floor reached: candidate {best.candidate.number} runs at {best.floor_fraction:.0%} of the "
                    f"roofline (stop at {policy.floor_fraction_stop:.0%})")
    decided = list(run.candidates.filter(status__in=DECIDED).order_by("-number")
                   .values_list("status", flat=True)[:policy.plateau_k])
    if len(decided) >= policy.plateau_k and not any(
            s in (Candidate.Status.KEPT, Candidate.Status.AWAITING_REVIEW) for s in decided):
        return f"plateau: no kept candidate in the last {policy.plateau_k}"
    if run.proposer_settings.get("exhausted") and idle:
        return "the proposer has nothing left to try"
    return ""


def run_finish(*, run: Run, reason: str) -> bool:
    """running -> finished with its reason (inside the run's transaction)."""
    if not Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(
            status=Run.Status.FINISHED, stop_reason=reason, finished=timezone.now()):
        return False
    candidate_cancel_unstarted(run=run, why=f"the run finished ({reason})")
    event_write(type="run.finished", actor="loop", subject=run, run_id=run.pk, payload={"reason": reason})
    return True


def capacity(run: Run) -> int:
    return live_workers(run.hardware).count()


def run_advance(*, run_id: int) -> dict:
    """Apply the stop rules, dispatch up to capacity, ask for a proposal when a slot is free.
    Safe to run any number of times; every change is conditional."""
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id).first()
        if run is None or run.status != Run.Status.RUNNING:
            return {"status": getattr(run, "status", None)}
        state = _budget_state(run)
        reason = stop_reason(run, state)
        if reason:
            run_finish(run=run, reason=reason)
            return {"status": Run.Status.FINISHED, "reason": reason}
        free = capacity(run) - state["in_flight"]
        dispatched = 0
        if free > 0 and not state["gpu_spent"]:
            for candidate in run.candidates.filter(status=Candidate.Status.PROPOSED).order_by("number")[:free]:
                dispatched += candidate_dispatch(candidate=candidate)
        wants_proposal = (free - dispatched > 0 and state["proposed"] - dispatched <= 0
                          and can_propose(run, state))
        if wants_proposal:
            outbox_enqueue(task=Task.LOOP_PROPOSE, queue=LOOP_QUEUE, args=[run.pk])
    return {"status": run.status, "dispatched": dispatched, "free": free, "propose": wants_proposal}


def can_propose(run: Run, state: dict | None = None) -> bool:
    state = state or _budget_state(run)
    return (run.status == Run.Status.RUNNING and run.proposer != Run.Proposer.HUMAN
            and not state["candidates_spent"] and not state["gpu_spent"]
            and not run.proposer_settings.get("exhausted"))


def proposal_wanted(run: Run) -> bool:
    """Whether the run's proposer should be asked now: it may propose, nothing waits, a worker is free."""
    state = _budget_state(run)
    return can_propose(run, state) and state["proposed"] == 0 and capacity(run) - state["in_flight"] > 0


def run_mark_exhausted(*, run: Run, why: str) -> None:
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        if run.proposer_settings.get("exhausted"):
            return
        Run.objects.filter(pk=run.pk).update(proposer_settings={**run.proposer_settings, "exhausted": why})
        event_write(type="run.proposer_exhausted", actor="loop", subject=run, run_id=run.pk, payload={"reason": why})
