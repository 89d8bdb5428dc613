"""Decisions: the policy's keep/revert on a recorded report, and a reviewer's approve or veto.

In `auto` review mode a passing candidate is kept at once; in `gate` mode it waits in
`awaiting_review` until a reviewer approves (kept, the new incumbent) or vetoes it (with the
reviewer's reason). Promotion to serving is separate and always needs a person (deployments.py).
"""

from __future__ import annotations

import os

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from loop import policy
from loop.audit import event_write
from loop.models import Candidate, Decision, Run
from loop.roles import REVIEW, check_permission
from loop.services.runs import run_advance_soon
from loop.staleness import Staleness, candidate_staleness


class StaleVerdict(ValidationError):
    """Approving a candidate whose comparison is out of date needs an explicit confirmation."""

    def __init__(self, staleness: Staleness):
        self.staleness = staleness
        super().__init__(f"{staleness.text}: re-benchmark it, or confirm that you approve it anyway")


def _four_eyes_setting() -> tuple[bool, set[str]]:
    """ARK_FOUR_EYES (on for everyone) and ARK_FOUR_EYES_TEAMS (group names: on for their members), from
    settings or the environment; both off by default."""
    on = getattr(settings, "ARK_FOUR_EYES", None)
    if on is None:
        on = os.environ.get("ARK_FOUR_EYES", "").lower() in ("1", "true", "yes", "on")
    teams = getattr(settings, "ARK_FOUR_EYES_TEAMS", None)
    if teams is None:
        teams = os.environ.get("ARK_FOUR_EYES_TEAMS", "")
    if isinstance(teams, str):
        teams = [t.strip() for t in teams.split(",")]
    return bool(on), {t for t in teams if t}


def four_eyes_check(*, actor, candidate: Candidate) -> None:
    """Under the four-eyes setting, the person who submitted a candidate or started its run may not approve
    or promote it alone: PermissionDenied saying who must. Off by default; on for everyone with
    ARK_FOUR_EYES, or for the members of the groups in ARK_FOUR_EYES_TEAMS (docs/domain.md, Roles).
    deployment_promote's view calls it too."""
    on, teams = _four_eyes_setting()
    run = Run.objects.select_related("created_by").get(pk=candidate.run_id)
    involved = {"submitted it": candidate.author_id, "started its run": run.created_by_id}
    for role, user_id in involved.items():
        if user_id is None or user_id != getattr(actor, "pk", None):
            continue
        applies = on or bool(teams and actor.groups.filter(name__in=teams).exists())
        if applies:
            raise PermissionDenied(f"four eyes: {actor.get_username()} {role}; another person must approve or "
                                   f"promote candidate {candidate.run_id}.{candidate.number}")

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
            note: str, event: str, confirmed: dict | None = None) -> Decision:
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
                             "note": note, "confirmed": confirmed or {}})
        run_advance_soon(candidate.run_id)  # a new incumbent or a veto changes the stop rules' view
    candidate.refresh_from_db()
    return decision


def candidate_approve(*, candidate: Candidate, actor, note: str = "", confirm_stale: bool = False) -> Decision:
    """A reviewer keeps a candidate that passed the policy in a gated run; it becomes the incumbent.
    When what it was measured against has been superseded (loop/staleness.py), StaleVerdict unless
    `confirm_stale`; the event records what was confirmed. Under four eyes, not by its submitter or run starter."""
    check_permission(actor, REVIEW)
    four_eyes_check(actor=actor, candidate=candidate)
    with transaction.atomic():
        # the run's lock: two approvals at once cannot both read the old incumbent as current
        Run.objects.select_for_update().get(pk=candidate.run_id)
        candidate = Candidate.objects.select_related("run__thesis", "run__incumbent").get(pk=candidate.pk)
        stale = candidate_staleness(candidate)
        if stale is not None and not confirm_stale:
            raise StaleVerdict(stale)
        text = f"Approved by {actor.get_username()}" + (f": {note}" if note else ".")
        if stale is not None:
            text += f" Confirmed although {stale.text}."
        return _review(candidate=candidate, actor=actor, verdict=Decision.Verdict.APPROVE,
                       status=Candidate.Status.KEPT, reason_code="approved", reason_text=text, note=note,
                       event="candidate.approved", confirmed={"stale": stale.to_json()} if stale else None)


def candidate_veto(*, candidate: Candidate, actor, reason: str, confirmed: bool = False) -> Decision:
    """A reviewer reverts a passing candidate with a reason (required). `confirmed`: the person confirmed
    it (the console asks); recorded in the event."""
    if not reason or not reason.strip():
        raise ValidationError("a veto needs a reason")
    return _review(candidate=candidate, actor=actor, verdict=Decision.Verdict.VETO, status=Candidate.Status.VETOED,
                   reason_code=policy.VETOED, reason_text=reason.strip(), note="", event="candidate.vetoed",
                   confirmed={"veto": True} if confirmed else None)
