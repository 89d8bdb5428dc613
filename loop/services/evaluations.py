"""Recording a GPU worker's report: once per (candidate, attempt), fenced by the current attempt.

A late report from an attempt the reaper already gave up on, or a second copy of one already
recorded, changes nothing (the task is delivered at least once; docs/architecture.md).
"""

from __future__ import annotations

import logging
import math

from django.db import transaction
from django.db.models import F

from gpu_worker.contract import ContractError, Report, Verdict, from_json, to_json
from loop import keep, policy
from loop.audit import event_write
from loop.models import Candidate, Evaluation, Run
from loop.services.candidates import IN_FLIGHT
from loop.services.decisions import decision_apply

log = logging.getLogger(__name__)


def json_safe(value, depth: int = 0):
    """The report as the database can store it: non-finite numbers become None (PostgreSQL's
    jsonb refuses NaN), keys become strings, nesting is bounded."""
    if depth > 64:
        return None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v, depth + 1) for v in value]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return repr(value)[:200]


def report_received(report, *, candidate_id: int, attempt: int) -> tuple[dict, dict]:
    """(what to store, what the policy reads). A report that reads through the contract
    (gpu_worker/contract.py; a /1 report converted once) is both. One that does not is stored as it came,
    for a person to read, while the policy reads a harness error saying why, so the candidate ends in
    error instead of being judged on fields the contract does not know."""
    stored = json_safe(report) if isinstance(report, dict) else {"unparsed": repr(report)[:2000]}
    try:
        read = to_json(from_json(stored))
        return read, read
    except (ContractError, ValueError, TypeError) as exc:
        log.warning("report for candidate %s attempt %s does not read: %s", candidate_id, attempt, exc)
        return stored, to_json(Report(candidate_id=candidate_id, attempt=attempt,
                                      verdict=Verdict(status="error", reasons=["harness:report_contract"],
                                                      message=f"the worker's report does not read: {exc}"[:4000])))


def candidate_record_report(*, candidate_id: int, attempt: int, worker: str, report) -> Evaluation | None:
    """Store the report, count its GPU time, apply the policy. None when fenced off (stale or repeated)."""
    with transaction.atomic():
        candidate = Candidate.objects.select_for_update().filter(pk=candidate_id).first()
        if candidate is None or candidate.attempt != attempt or candidate.status not in IN_FLIGHT:
            log.info("report for candidate %s attempt %s ignored (now attempt %s, %s)", candidate_id, attempt,
                     getattr(candidate, "attempt", None), getattr(candidate, "status", "missing"))
            return None
        run = Run.objects.select_for_update().get(pk=candidate.run_id)
        stored, report = report_received(report, candidate_id=candidate_id, attempt=attempt)
        numbers = policy.summary_numbers(report)
        seconds = policy.gpu_seconds(report)
        evaluation = Evaluation.objects.create(
            candidate=candidate, attempt=attempt, worker=worker,
            hardware_fingerprint=report["hardware"] or {},
            report=stored, gpu_seconds=seconds, **numbers,
        )
        Run.objects.filter(pk=run.pk).update(gpu_seconds_used=F("gpu_seconds_used") + seconds)
        event_write(type="candidate.reported", actor=worker, subject=candidate, run_id=run.pk, payload={
            "number": candidate.number, "attempt": attempt, "evaluation": evaluation.pk,
            "report_verdict": report["verdict"]["status"], "gpu_seconds": seconds})

        outcome = keep.decide(report, policy.RunPolicy.from_json(run.policy))
        measured_against = candidate.proposal.get("measured_against")
        if outcome.passes and measured_against != run.incumbent_id and run.status in (Run.Status.RUNNING,
                                                                                    Run.Status.PAUSED):
            # Another candidate became the incumbent while this one was measured: measure again.
            Candidate.objects.filter(pk=candidate.pk).update(status=Candidate.Status.PROPOSED, stage="",
                                                             lease_expires=None)
            event_write(type="candidate.remeasure", actor="policy", subject=candidate, run_id=run.pk, payload={
                "number": candidate.number, "attempt": attempt, "measured_against": measured_against,
                "incumbent": run.incumbent_id})
            return evaluation
        decision_apply(candidate=candidate, outcome=outcome)
    return evaluation
