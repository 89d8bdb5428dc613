"""Decisions: the policy's keep/revert on a recorded report, and a reviewer's approve or veto.

In `auto` review mode a passing candidate is kept at once; in `gate` mode it waits in
`awaiting_review` until a reviewer approves (kept, the new incumbent) or vetoes it (with the
reviewer's reason). Promotion to serving is separate and always needs a person (deployments.py).
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction

from loop import policy
from loop.audit import event_write
from loop.models import Candidate, Decision, Run
from loop.roles import REVIEW, check_permission
from loop.services.runs import run_advance_soon

VERDICT_STATUS = {
    policy.REVERT: Candidate.Status.REVERTED,
    policy.ERROR: Candidate.Status.ERROR,
}


def decision_apply(*, candidate: Candidate, outcome: policy.Outcome) -> Decision:
    """Apply the policy's outcome to a candidate whose report was just recorded (inside that
    transaction; the caller holds the candidate's row lock and checked its state)."""
    run = Run.objects.select_for_update().get(pk=candidate.run_id)
    if outcome.verdict == policy.KEEP and run.review_mode == Run.ReviewMode.GATE:
        status, verdict = Candidate.Status.AWAITING_REVIEW, Decision.Verdict.AWAIT_REVIEW
    elif outcome.verdict == policy.KEEP:
        status, verdict = Candidate.Status.KEPT, Decision.Verdict.KEEP
    else:
        status = VERDICT_STATUS[outcome.verdict]
        verdict = Decision.Verdict.ERROR if outcome.verdict == policy.ERROR else Decision.Verdict.REVERT
    Candidate.objects.filter(pk=candidate.pk).update(status=status, stage="", lease_expires=None,
                                                     reason_code=outcome.reason_code, reason_text=outcome.reason_text)
    decision = Decision.objects.create(candidate=candidate, verdict=verdict, reason_code=outcome.reason_code,
                                       reason_text=outcome.reason_text, actor="policy")
    if status == Candidate.Status.KEPT:
        Run.objects.filter(pk=run.pk).update(incumbent=candidate)
    if outcome.reason_code == policy.UNMEASURED and not run.notice:
        Run.objects.filter(pk=run.pk).update(notice=(
            "CPU mode: candidates are verified on the CPU, but timings need a GPU worker; "
            "nothing in this run is kept on invented numbers."))
    event_write(type=f"candidate.{status}", actor="policy", subject=candidate, run_id=run.pk, payload={
        "number": candidate.number, "attempt": candidate.attempt, "verdict": verdict,
        "reason_code": outcome.reason_code, "reason_text": outcome.reason_text, "numbers": outcome.numbers})
    return decision


def _review(*, candidate: Candidate, actor, verdict: str, status: str, reason_code: str, reason_text: str,
            note: str, event: str) -> Decision:
    check_permission(actor, REVIEW)
    with transaction.atomic():
        moved = Candidate.objects.filter(pk=candidate.pk, status=Candidate.Status.AWAITING_REVIEW).update(
            status=status, reason_code=reason_code, reason_text=reason_text)
        if not moved:
            current = Candidate.objects.get(pk=candidate.pk).status
            raise ValidationError(f"candidate {candidate.run_id}.{candidate.number} is {current}, not awaiting review")
        decision = Decision.objects.create(candidate=candidate, verdict=verdict, reason_code=reason_code,
                                           reason_text=reason_text, actor=actor.get_username(), user=actor)
        if status == Candidate.Status.KEPT:
            Run.objects.filter(pk=candidate.run_id).update(incumbent=candidate)
        event_write(type=event, actor=actor, subject=candidate, run_id=candidate.run_id,
                    payload={"number": candidate.number, "reason_code": reason_code, "reason_text": reason_text,
                             "note": note})
        run_advance_soon(candidate.run_id)  # a new incumbent or a veto changes the stop rules' view
    candidate.refresh_from_db()
    return decision


def candidate_approve(*, candidate: Candidate, actor, note: str = "") -> Decision:
    """A reviewer keeps a candidate that passed the policy in a gated run; it becomes the incumbent."""
    text = f"Approved by {actor.get_username()}" + (f": {note}" if note else ".")
    return _review(candidate=candidate, actor=actor, verdict=Decision.Verdict.APPROVE, status=Candidate.Status.KEPT,
                   reason_code="approved", reason_text=text, note=note,
                   event="candidate.approved")


def candidate_veto(*, candidate: Candidate, actor, reason: str) -> Decision:
    """A reviewer reverts a passing candidate with a reason (required)."""
    if not reason or not reason.strip():
        raise ValidationError("a veto needs a reason")
    return _review(candidate=candidate, actor=actor, verdict=Decision.Verdict.VETO, status=Candidate.Status.VETOED,
                   reason_code=policy.VETOED, reason_text=reason.strip(), note="",
                   event="candidate.vetoed")
