"""The demo a newcomer walks on any machine (scripts/run loads it unless --no-demo): the reports recorded on an
H200 (bench/results/h200/2026-12-04/reports) imported as finished runs, and one run in gate mode on the demo
thesis whose recorded candidates await review, so thesis -> candidates -> diff -> approve/veto -> promote ->
rollback -> audit can be walked without a GPU. Every demo run says where and when it was recorded; nothing in
it is live. Loading twice adds nothing (docs/operations.md)."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from gpu_worker.hardware import kind_from_name
from loop import keep, policy
from loop.audit import event_write
from loop.models import Candidate, Evaluation, Run, Target, Thesis
from loop.services.candidates import source_hash
from loop.services.decisions import decision_apply
from loop.services.imports import PROPOSER, _read, _read_report, records_for, reports_import

DEMO_REPORTS = Path(settings.BASE_DIR) / "bench" / "results" / "h200" / "2026-12-04" / "reports"
GATE_TARGET = "dsa_topk"
GATE_THESIS_TITLE = "Top-2048 over 128K logits: one pass instead of a full sort"  # bootstrap's demo thesis


def recorded_label(device: str, date: str) -> str:
    return f"recorded on {device}, {date}" if date else f"recorded on {device}"


def _gate_thesis(actor, target: Target) -> Thesis:
    thesis = Thesis.objects.filter(target=target, title=GATE_THESIS_TITLE).order_by("pk").first()
    if thesis is None:
        thesis = Thesis.objects.create(
            title=GATE_THESIS_TITLE, target=target, hardware="h200", owner=actor, model="deepseek-v3.2",
            body="The demo thesis: a radix select for the DSA indexer's top-k (see the recorded run below).")
    return thesis


def _gate_reports(path: Path) -> list[tuple[Path, dict, str]]:
    items, records = [], records_for(path)
    for file in sorted(path.glob(f"{GATE_TARGET}__*.json")):
        report, source = _read_report(file, _read(file), records)
        items.append((file, report, source))
    # the seed first, then the best: the candidate page's diff then reads as "what the best changed"
    return sorted(items, key=lambda item: (not item[0].stem.endswith("seed"), item[0].name))


def demo_loaded() -> bool:
    return Run.objects.filter(proposer_settings__demo=True).exists()


def demo_load(*, actor, path: Path = DEMO_REPORTS) -> dict:
    """Import the recorded reports and create the gate-mode review run; a no-op once the demo is there."""
    if demo_loaded():
        return {"imported": [], "gate_run": None}
    path = Path(path)
    imported = reports_import(path=path, actor=actor)
    items = _gate_reports(path)
    report = items[0][1]
    device = (report["hardware"] or {}).get("gpu") or "unknown GPU"
    date = str(report["date"] or "")[:10]
    label = recorded_label(device, date)
    with transaction.atomic():
        thesis = _gate_thesis(actor, Target.objects.get(name=GATE_TARGET))
        run = Run.objects.create(
            thesis=thesis, hardware=kind_from_name(device), proposer=Run.Proposer.HUMAN, created_by=actor,
            review_mode=Run.ReviewMode.GATE, budget_candidates=len(items), profile="full",
            proposer_settings={"demo": True, "files": [f.name for f, _, _ in items]},
            imported_from=str(path.relative_to(settings.BASE_DIR) if path.is_relative_to(settings.BASE_DIR) else path),
            imported_device=device, imported_date=date, status=Run.Status.RUNNING,
            notice=f"Demo, {label}: these reports were measured on that GPU and loaded here; nothing in this run "
                   "is live. Its candidates await your review: open one, read its diff, approve or veto it.")
        seed = None
        for number, (file, report, source) in enumerate(items, start=1):
            candidate = Candidate.objects.create(
                run=run, number=number, parent=seed, source=source, source_hash=source_hash(source), proposer=PROPOSER,
                proposal={"kind": "import", "file": file.name, "label": report["candidate_id"], "demo": True},
                status=Candidate.Status.RUNNING, attempt=int(report["attempt"] or 1))
            Evaluation.objects.create(candidate=candidate, attempt=candidate.attempt, worker=f"import:{device}",
                                      hardware_fingerprint=report["hardware"] or {}, report=report,
                                      gpu_seconds=policy.gpu_seconds(report), **policy.summary_numbers(report))
            decision_apply(candidate=candidate, outcome=keep.decide(report, policy.RunPolicy.from_json(run.policy)))
            seed = seed or candidate  # the best's parent is the seed: its page shows what the best changed
        Run.objects.filter(pk=run.pk).update(status=Run.Status.FINISHED, finished=timezone.now(),
                                             stop_reason=f"demo: {label}")
        event_write(type="run.imported", actor=actor, subject=run, run_id=run.pk, payload={
            "path": run.imported_from, "device": device, "date": date, "reports": len(items), "demo": True})
    run.refresh_from_db()
    return {"imported": imported, "gate_run": run}
