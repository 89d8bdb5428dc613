"""Independent re-timing before promotion (issue 20; docs/isolation.md, Independent re-timing).

A kept candidate whose report holds GPU timings is re-timed on a GPU worker of its hardware (gpu.retime),
a different worker from the one that made the report when one is alive. The worker sends back only the
times it measured; the verdict is computed here, against the report, by gpu_worker/fib/confirm.py, and kept
as a Confirmation with an Event. deployment_promote asks `confirmation_gate` before it promotes.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from gpu_worker.fib.confirm import NOT_ON_CPU, confirm, promotion_allowed
from gpu_worker.queues import Task, gpu_queue
from loop.audit import event_write
from loop.models import Candidate, Confirmation, Evaluation, Worker
from loop.roles import PROMOTE, check_permission
from loop.selectors import timings_available
from loop.services.outbox import outbox_enqueue


def _latest_evaluation(candidate: Candidate) -> Evaluation | None:
    return candidate.evaluations.order_by("-attempt").first()


def needs_confirmation(candidate: Candidate) -> bool:
    """Whether a promotion of this candidate rests on GPU timings (nothing timed on a CPU: nothing to confirm)."""
    evaluation = _latest_evaluation(candidate)
    return evaluation is not None and timings_available(evaluation.report)


def _other_live_worker(hardware: str, besides: str) -> str | None:
    live_since = timezone.now() - timedelta(seconds=settings.ARK_HEARTBEAT_TIMEOUT_S)
    return (Worker.objects.filter(hardware=hardware, last_heartbeat__gte=live_since).exclude(name=besides)
            .values_list("name", flat=True).first())


def confirmation_request(*, actor, candidate: Candidate) -> Confirmation:
    """Queue a re-timing of the candidate's latest evaluation ("re-time now")."""
    check_permission(actor, PROMOTE)
    candidate = Candidate.objects.select_related("run__thesis__target").get(pk=candidate.pk)
    if candidate.status != Candidate.Status.KEPT:
        raise ValidationError(f"only a kept candidate is re-timed before promotion; this one is {candidate.status}")
    evaluation = _latest_evaluation(candidate)
    if evaluation is None or not timings_available(evaluation.report):
        raise ValidationError(f"{NOT_ON_CPU}: this candidate's report holds no GPU timings to re-time")
    run = candidate.run
    other = _other_live_worker(run.hardware, evaluation.worker)
    with transaction.atomic():
        confirmation = Confirmation.objects.create(candidate=candidate, evaluation=evaluation, requested_by=actor,
                                                   evaluated_by=evaluation.worker)
        spec = {"confirmation_id": confirmation.pk, "candidate_id": candidate.pk, "target": run.thesis.target.name,
                "target_document": run.thesis.target.document or None, "source": candidate.source,
                "shapes": [row["shape"] for row in _benchmark_rows(evaluation.report)] or None,
                "avoid_worker": evaluation.worker if other else None}
        event_write(type="candidate.retime_requested", actor=actor, subject=candidate, run_id=run.pk, payload={
            "number": candidate.number, "confirmation": confirmation.pk, "evaluation": evaluation.pk,
            "evaluated_by": evaluation.worker, "other_worker_alive": other})
        outbox_enqueue(task=Task.GPU_RETIME, queue=gpu_queue(run.hardware), args=[spec])
    return confirmation


def _benchmark_rows(report: dict) -> list[dict]:
    return [s for s in ((report.get("stages") or {}).get("benchmark") or {}).get("shapes") or [] if "shape" in s]


def confirmation_record(*, confirmation_id: int, worker: str, retimed: dict) -> Confirmation | None:
    """The worker's measurements: the verdict is computed here from them and the evaluation's report. A
    second answer to the same request changes nothing."""
    with transaction.atomic():
        confirmation = (Confirmation.objects.select_for_update().select_related("candidate", "evaluation")
                        .filter(pk=confirmation_id).first())
        if confirmation is None or confirmation.status != Confirmation.Status.QUEUED:
            return None
        retimed = retimed if isinstance(retimed, dict) else {}
        result = confirm(confirmation.evaluation.report, retimed)
        harness = [f for f in retimed.get("findings") or [] if isinstance(f, dict)]
        if result["status"] != "unavailable" and harness:
            result = {**result, "status": "unconfirmed", "findings": [
                {"code": "bench:unconfirmed", "message": str(f.get("message"))[:300]} for f in harness] + result["findings"]}
        confirmation.status = result["status"]
        confirmation.worker = str(worker)[:200]
        confirmation.retimed, confirmation.result = retimed, result
        confirmation.finished = timezone.now()
        confirmation.save()
        candidate = confirmation.candidate
        event_write(type=f"candidate.retime_{result['status']}", actor=confirmation.worker, subject=candidate,
                    run_id=candidate.run_id, payload={
                        "number": candidate.number, "confirmation": confirmation.pk,
                        "evaluated_by": confirmation.evaluated_by, "worker": confirmation.worker,
                        "findings": [f.get("message") for f in result.get("findings") or []][:5],
                        "shapes": result.get("shapes") or []})
    return confirmation


def latest_confirmation(candidate: Candidate) -> Confirmation | None:
    """The newest finished re-timing of the candidate's latest evaluation."""
    evaluation = _latest_evaluation(candidate)
    if evaluation is None:
        return None
    return (Confirmation.objects.filter(candidate=candidate, evaluation=evaluation)
            .exclude(status=Confirmation.Status.QUEUED).order_by("-finished", "-pk").first())


def confirmation_gate(candidate: Candidate) -> tuple[bool, str]:
    """promotion_allowed for this candidate: GPU timings need a confirmed re-timing; CPU ones go through."""
    if not getattr(settings, "ARK_PROMOTION_NEEDS_RETIMING", True):
        return True, "re-timing not required on this deployment (ARK_PROMOTION_NEEDS_RETIMING=0)"
    latest = latest_confirmation(candidate)
    verdict = latest.result if latest is not None else None
    return promotion_allowed(verdict, on_gpu=needs_confirmation(candidate))


def confirmation_summary(candidate: Candidate) -> dict:
    """For the candidate page: one sentence and whether a re-timing can be asked for."""
    on_gpu = needs_confirmation(candidate)
    if not on_gpu:
        return {"status": "cpu", "text": NOT_ON_CPU, "can_request": False}
    queued = Confirmation.objects.filter(candidate=candidate, status=Confirmation.Status.QUEUED).exists()
    latest = latest_confirmation(candidate)
    if latest is None:
        text = "not re-timed yet: a promotion needs an independent re-timing"
        if queued:
            hardware = candidate.run.hardware
            text = "re-timing queued" + ("" if _other_live_worker(hardware, besides="") else
                                         f" (no {hardware} worker is alive now: it runs when one starts)")
        return {"status": "queued" if queued else "none", "text": text, "can_request": not queued}
    same = latest.worker == latest.evaluated_by
    where = f"{latest.worker}{' (the worker that made the report: no other was alive)' if same else ''}"
    if latest.status == Confirmation.Status.CONFIRMED:
        rows = latest.result.get("shapes") or []
        worst = max(rows, key=lambda r: r["retimed_ratio"] / r["recorded_ratio"]) if rows else None
        ratio = (f": ratio {worst['retimed_ratio']:.3f} vs reported {worst['recorded_ratio']:.3f} on the least "
                 "agreeing shape") if worst else ""
        text = f"confirmed by an independent re-timing on {where}{ratio}"
    elif latest.status == Confirmation.Status.UNAVAILABLE:
        text = f"re-timing unavailable on {where}: {latest.result.get('reason')}"
    else:
        first = (latest.result.get("findings") or [{}])[0].get("message", "")
        text = f"unconfirmed by the re-timing on {where}: {first}"
    return {"status": latest.status, "text": text, "can_request": not queued, "confirmation": latest}
