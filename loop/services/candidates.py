"""Candidates: submit (checked before anything is queued), dispatch through the outbox, stage
progress, leases renewed by the worker's heartbeat, and the reaper's re-queue or give-up.

A candidate's `attempt` fences everything the GPU side sends: progress and reports carry the
attempt they belong to, and only the current attempt of an unfinished candidate changes state.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import logging
import os
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F, Max, Q
from django.utils import timezone

from gpu_worker.contract import MAX_SOURCE_BYTES
from gpu_worker.queues import Task, gpu_queue
from loop.audit import event_write
from loop.models import Candidate, Decision, Run
from loop.roles import REVIEW, check_permission
from loop.services.outbox import outbox_enqueue
from loop.staleness import candidate_staleness, serving_version

log = logging.getLogger(__name__)

# Sent to a GPU worker and not yet reported; OPEN adds those still waiting to be sent.
IN_FLIGHT = (Candidate.Status.QUEUED, Candidate.Status.RUNNING)
OPEN = (Candidate.Status.PROPOSED, *IN_FLIGHT)
# Decorators that show a kernel is written in each DSL (docs/harness.md, What the harness is given).
DSL_DECORATORS = {
    "triton": {"triton.jit", "jit", "triton.autotune", "triton.heuristics"},
    "cute": {"cute.kernel", "cute.jit", "cutlass.cute.kernel", "cutlass.cute.jit"},
}
DSL_REQUIRED = {"triton": {"triton.jit", "jit"}, "cute": {"cute.kernel", "cutlass.cute.kernel"}}


def _setting(name: str, default: float) -> float:
    value = getattr(settings, name, None)
    return float(value if value is not None else os.environ.get(name, default))


def lease_seconds() -> float:
    """How long a running candidate's worker may stay silent (heartbeats renew it)."""
    return _setting("ARK_LEASE_S", 90)


def queue_lease_seconds() -> float:
    """How long a queued candidate may wait for a worker to start it."""
    return _setting("ARK_QUEUE_LEASE_S", 1800)


def source_hash(source: str) -> str:
    """Same as gpu_worker.dispatch.loader.source_hash: the serving config's hash of a source."""
    return "sha256:" + hashlib.sha256(source.encode("utf-8")).hexdigest()


class CandidateRejected(ValidationError):
    """The source failed a check at submit; `problems` lists each one; nothing was queued."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__(self.problems)


def _dotted(node) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def source_problems(source: str, *, dsls: list[str] | tuple[str, ...]) -> list[str]:
    """What is wrong with a candidate source before any worker sees it: size, syntax, forward(),
    PARAMS literal, and the target's DSL."""
    if not isinstance(source, str) or not source.strip():
        return ["the source is empty"]
    size = len(source.encode("utf-8"))
    if size > MAX_SOURCE_BYTES:
        return [f"the source is {size} bytes; the limit is {MAX_SOURCE_BYTES}"]
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [f"syntax error at line {exc.lineno}: {exc.msg}"]
    problems = []
    functions = {node.name: node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if "forward" not in functions:
        problems.append("no module-level forward(...) function")
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "PARAMS" for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                problems.append(f"PARAMS (line {node.lineno}) must be a literal dict")
                continue
            if not isinstance(value, dict):
                problems.append(f"PARAMS (line {node.lineno}) must be a dict")
    if dsls:
        decorators = {_dotted(d) for node in ast.walk(tree)
                      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) for d in node.decorator_list}
        if not any(decorators & DSL_REQUIRED.get(dsl, set()) for dsl in dsls):
            wanted = " or ".join(sorted(d for dsl in dsls for d in DSL_REQUIRED.get(dsl, {dsl}) if "." in d))
            problems.append(f"no kernel in the target's DSL ({', '.join(dsls)}): expected a function decorated "
                            f"with {wanted}")
    return problems


def _diff(parent: Candidate | None, source: str) -> str:
    if parent is None:
        return ""
    lines = difflib.unified_diff(parent.source.splitlines(keepends=True), source.splitlines(keepends=True),
                                 fromfile=f"candidate {parent.number}", tofile="this candidate")
    return "".join(lines)


def _next_number(run: Run) -> int:
    return (run.candidates.aggregate(n=Max("number"))["n"] or 0) + 1


HARNESS_KEYS = ("e2e_routes", "measured_against")  # proposal keys the loop writes, never a proposer


def candidate_submit(*, run: Run, source: str, proposer: str, author=None, parent: Candidate | None = None,
                     params: dict | None = None, proposal: dict | None = None) -> Candidate:
    """Record a checked candidate as `proposed`; the run's dispatch queues it. Raises
    CandidateRejected (nothing stored) when the source fails a check, the run is not accepting
    candidates, its candidate budget is spent, or the same source is already in the run."""
    with transaction.atomic():
        run = Run.objects.select_for_update().select_related("thesis__target").get(pk=run.pk)
        problems = source_problems(source, dsls=run.thesis.target.dsls)
        if run.status not in (Run.Status.RUNNING, Run.Status.PAUSED):
            problems.append(f"the run is {run.status}")
        if run.candidates.count() >= run.budget_candidates:
            problems.append(f"the run's budget of {run.budget_candidates} candidates is spent")
        digest = source_hash(source) if isinstance(source, str) else ""
        twin = run.candidates.filter(source_hash=digest).first()
        if twin is not None:
            problems.append(f"the same source is already candidate {twin.number}")
        if problems:
            raise CandidateRejected(problems)
        candidate = Candidate.objects.create(
            run=run, number=_next_number(run), parent=parent, source=source, source_hash=digest,
            params=params or {}, diff=_diff(parent, source), proposer=proposer, author=author,
            # the e2e route set is a reviewer's (candidate_rebenchmark), never the proposer's
            proposal={k: v for k, v in (proposal or {}).items() if k not in HARNESS_KEYS},
        )
        event_write(type="candidate.proposed", actor=author or proposer, subject=candidate, run_id=run.pk,
                    payload={"number": candidate.number, "proposer": proposer, "params": candidate.params,
                             "source_hash": digest})
    return candidate


def candidate_record_rejected_proposal(*, run: Run, proposer: str, reason: str, source: str = "",
                                       params: dict | None = None, proposal: dict | None = None,
                                       author=None) -> Candidate | None:
    """An unusable proposal (no source, or one that fails its checks) stays visible: a candidate
    reverted with reason `error`. It counts against the run's candidate budget; None (nothing
    recorded) when the run stopped or its budget was spent while the proposer worked."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        if run.status not in (Run.Status.RUNNING, Run.Status.PAUSED) or run.candidates.count() >= run.budget_candidates:
            log.info("run %s: unusable proposal dropped, the run is %s", run.pk, run.status)
            return None
        candidate = Candidate.objects.create(
            run=run, number=_next_number(run), source=source, source_hash=source_hash(source), proposer=proposer,
            params=params or {}, proposal=proposal or {}, author=author, status=Candidate.Status.REVERTED, reason_code="error",
            reason_text=f"Unusable proposal: {reason}",
        )
        Decision.objects.create(candidate=candidate, verdict=Decision.Verdict.REVERT, reason_code="error",
                                reason_text=candidate.reason_text, actor="policy")
        event_write(type="candidate.rejected_proposal", actor=author or proposer, subject=candidate,
                    run_id=run.pk, payload={"number": candidate.number, "proposer": proposer, "reason": reason})
    return candidate


def evaluation_spec(candidate: Candidate) -> dict:
    run = candidate.run
    incumbent = run.incumbent
    return {
        "candidate_id": candidate.pk, "attempt": candidate.attempt, "target": run.thesis.target.name,
        "hardware": run.hardware, "profile": run.profile, "source": candidate.source, "params": candidate.params,
        "incumbent_id": incumbent.pk if incumbent else None,
        "incumbent_source": incumbent.source if incumbent else None,
        # set only by candidate_rebenchmark(e2e_routes=...): the e2e gate serves the candidate in these boxes
        "e2e_routes": (candidate.proposal or {}).get("e2e_routes"),
        # an imported FlashInfer-Bench target travels whole: the worker builds it from this (docs/interop.md)
        "target_document": run.thesis.target.document or None,
    }


def candidate_dispatch(*, candidate: Candidate) -> bool:
    """proposed -> queued with a new attempt, its evaluation published through the outbox.
    Call inside the run's locked transaction (run_advance). Returns False if it was not proposed."""
    now = timezone.now()
    moved = Candidate.objects.filter(pk=candidate.pk, status=Candidate.Status.PROPOSED).update(
        status=Candidate.Status.QUEUED, stage="", worker="", attempt=F("attempt") + 1,
        lease_expires=now + timedelta(seconds=queue_lease_seconds()),
    )
    if not moved:
        return False
    candidate.refresh_from_db()
    spec = evaluation_spec(candidate)
    # What it is measured against: a keep against an outdated incumbent is re-measured, and a verdict
    # awaiting review against a superseded incumbent or serving config is shown as stale (loop/staleness.py).
    candidate.proposal = {**candidate.proposal, "measured_against": spec["incumbent_id"]}
    run = candidate.run
    Candidate.objects.filter(pk=candidate.pk).update(
        proposal=candidate.proposal, measured_against_id=spec["incumbent_id"],
        measured_config_version=serving_version(run.thesis.target_id, run.hardware))
    outbox_enqueue(task=Task.GPU_EVALUATE, queue=gpu_queue(candidate.run.hardware), args=[spec])
    event_write(type="candidate.queued", actor="loop", subject=candidate, run_id=candidate.run_id,
                payload={"number": candidate.number, "attempt": candidate.attempt, "queue": gpu_queue(candidate.run.hardware),
                         "incumbent_id": spec["incumbent_id"]})
    return True


def candidate_record_progress(*, candidate_id: int, attempt: int, worker: str, stage: str, status: str,
                              detail: dict | None = None) -> bool:
    """A stage started or ended on a worker: running:<stage>, lease renewed. Fenced by attempt;
    a repeated message changes nothing."""
    label = f"{stage}:{status}"[:32]
    with transaction.atomic():
        moved = (Candidate.objects.filter(pk=candidate_id, attempt=attempt, status__in=IN_FLIGHT)
                 .exclude(stage=label, worker=worker)
                 .update(status=Candidate.Status.RUNNING, stage=label, worker=worker,
                         lease_expires=timezone.now() + timedelta(seconds=lease_seconds())))
        if not moved:
            return False
        candidate = Candidate.objects.get(pk=candidate_id)
        event_write(type="candidate.stage", actor=worker, subject=candidate, run_id=candidate.run_id,
                    payload={"number": candidate.number, "attempt": attempt, "stage": stage, "status": status,
                             "detail": _small(detail)})
    return True


def _small(detail) -> dict:
    """Progress details go into the event log: keep them to scalars and short strings."""
    if not isinstance(detail, dict):
        return {}
    return {str(k)[:40]: (v if isinstance(v, (int, float, bool)) or v is None else str(v)[:200])
            for k, v in list(detail.items())[:20]}


def candidate_leases_renew(*, worker: str, running: list | None = None) -> int:
    """The worker is alive (a heartbeat): renew the leases of what it is running. Not audited.
    `running`: the [candidate_id, attempt] pairs the heartbeat says the worker is evaluating now;
    a candidate it holds no more (its report was lost, its process restarted under the same name)
    is not renewed, so the reaper re-queues it. None (an older worker): everything in its name."""
    held = Candidate.objects.filter(worker=worker, status=Candidate.Status.RUNNING)
    if running is not None:
        pairs = [(int(c), int(a)) for c, a in running]
        if not pairs:
            return 0
        match = Q()
        for candidate_id, attempt in pairs:
            match |= Q(pk=candidate_id, attempt=attempt)
        held = held.filter(match)
    return held.update(lease_expires=timezone.now() + timedelta(seconds=lease_seconds()))


def candidate_requeue_or_fail(*, candidate: Candidate, max_attempts: int, why: str) -> str | None:
    """The reaper found an expired lease: back to `proposed` for a new attempt, or `error` once
    `max_attempts` evaluations were lost. Conditional on the attempt it saw: harmless twice."""
    with transaction.atomic():
        fence = Candidate.objects.filter(pk=candidate.pk, attempt=candidate.attempt, status__in=IN_FLIGHT,
                                         lease_expires__lt=timezone.now())
        if candidate.attempt >= max_attempts:
            text = f"Lost its worker {candidate.attempt} times ({why}); the attempt cap is {max_attempts}."
            if not fence.update(status=Candidate.Status.ERROR, lease_expires=None, reason_code="error",
                                reason_text=text):
                return None
            Decision.objects.create(candidate=candidate, verdict=Decision.Verdict.ERROR, reason_code="error",
                                    reason_text=text, actor="reaper")
            event_write(type="candidate.failed", actor="reaper", subject=candidate, run_id=candidate.run_id,
                        payload={"number": candidate.number, "attempt": candidate.attempt, "reason": text})
            return "failed"
        if not fence.update(status=Candidate.Status.PROPOSED, stage="", lease_expires=None):
            return None
        event_write(type="candidate.requeued", actor="reaper", subject=candidate, run_id=candidate.run_id,
                    payload={"number": candidate.number, "attempt": candidate.attempt, "worker": candidate.worker,
                             "reason": why})
    return "requeued"


def candidate_cancel_unstarted(*, run: Run, why: str) -> int:
    """A stopped or finished run leaves nothing waiting: its proposed candidates end as reverted
    with reason `cancelled`. Call inside the run's transaction."""
    cancelled = 0
    for candidate in run.candidates.filter(status=Candidate.Status.PROPOSED):
        text = f"Not evaluated: {why}."
        if not Candidate.objects.filter(pk=candidate.pk, status=Candidate.Status.PROPOSED).update(
                status=Candidate.Status.REVERTED, reason_code="cancelled", reason_text=text):
            continue
        Decision.objects.create(candidate=candidate, verdict=Decision.Verdict.REVERT, reason_code="cancelled",
                                reason_text=text, actor="loop")
        event_write(type="candidate.cancelled", actor="loop", subject=candidate, run_id=run.pk,
                    payload={"number": candidate.number, "reason": why})
        cancelled += 1
    return cancelled


def candidate_rebenchmark(*, candidate: Candidate, actor, e2e_routes: list | None = None) -> Candidate:
    """Measure a candidate awaiting review again, against the run's current incumbent: the same source,
    a new attempt queued at once (a person asked for it, so the run's worker slots and its status do not
    hold it back). Its verdict comes back through the policy like any other. `e2e_routes`: the route set
    its e2e gate serves it in (its proposed winning boxes, loop/regions.py), so the end-to-end verdict is
    the one of what would be promoted; None serves it everywhere (docs/keep-rule.md, Winning regions)."""
    check_permission(actor, REVIEW)
    if e2e_routes is not None and not (isinstance(e2e_routes, list) and e2e_routes
                                       and all(isinstance(r, dict) and "bounds" in r for r in e2e_routes)):
        raise ValidationError("the route set to measure end to end must be a non-empty list of boxes")
    with transaction.atomic():
        Run.objects.select_for_update().get(pk=candidate.run_id)
        candidate = Candidate.objects.select_related("run__thesis", "run__incumbent").get(pk=candidate.pk)
        if candidate.status != Candidate.Status.AWAITING_REVIEW:
            raise ValidationError(f"candidate {candidate.run_id}.{candidate.number} is {candidate.status}, "
                                  "not awaiting review")
        stale = candidate_staleness(candidate)
        proposal = {k: v for k, v in (candidate.proposal or {}).items() if k != "e2e_routes"}
        if e2e_routes is not None:
            proposal["e2e_routes"] = e2e_routes
        Candidate.objects.filter(pk=candidate.pk).update(status=Candidate.Status.PROPOSED, stage="",
                                                         reason_code="", reason_text="", proposal=proposal)
        candidate.proposal = proposal
        event_write(type="candidate.rebenchmark", actor=actor, subject=candidate, run_id=candidate.run_id,
                    payload={"number": candidate.number, "measured_against": candidate.measured_against_id,
                             "incumbent": candidate.run.incumbent_id, "stale": stale.text if stale else "",
                             "e2e_routes": e2e_routes})
        candidate_dispatch(candidate=candidate)
    candidate.refresh_from_db()
    return candidate
