"""Load reports recorded on a GPU (bench/results/<gpu>/*.json, `ark.report/1`, plus a latest.json
list of per-kernel records) as finished runs, labelled imported with their device and date.

One run per target in the folder. Each report becomes a candidate with its evaluation and the
policy's decision, exactly as if a worker had sent it. Importing the same files again is a no-op.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from gpu_worker.hardware import kind_from_name
from loop import policy
from loop.audit import event_write
from loop.models import Candidate, Evaluation, Run, Target, Thesis
from loop.services.candidates import source_hash
from loop.services.decisions import decision_apply

PROPOSER = "import"


def _read(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValidationError(f"{path}: not readable JSON ({exc})") from exc


def _files(path: Path) -> list[Path]:
    """The folder's JSON files and those of its `reports/` folder; a `reports/` folder also takes
    the `latest.json` next to it."""
    if path.is_dir():
        files = sorted(p for p in path.glob("*.json") if p.is_file())
        files += sorted(p for p in (path / "reports").glob("*.json") if p.is_file())
        sibling = path.parent / "latest.json"
        if path.name == "reports" and sibling.is_file():
            files.append(sibling)
        return files
    if path.is_file():
        return [path]
    raise ValidationError(f"{path}: no such file or folder")


_CANDIDATE_ARG = re.compile(r"--candidate\s+(\S+)")


def _source_from_command(file: Path) -> str:
    """The candidate's source: a `.py` beside the report (kept where the file it was measured from has
    changed since, e.g. a best.py replaced by a later best), else the repository path named in the report's
    `.cmd` file (`python -m gpu_worker evaluate --candidate <path> ...`), when that file is still there."""
    beside = file.with_suffix(".py")
    if beside.is_file():
        return beside.read_text(encoding="utf-8")
    command = file.with_suffix(".cmd")
    if not command.is_file():
        return ""
    match = _CANDIDATE_ARG.search(command.read_text(encoding="utf-8", errors="replace"))
    if not match:
        return ""
    root = Path(settings.BASE_DIR).resolve()
    candidate = (root / match.group(1)).resolve()
    if not candidate.is_relative_to(root) or not candidate.is_file():
        return ""
    return candidate.read_text(encoding="utf-8")


def _device_of(report: dict, records: list[dict]) -> tuple[str, str]:
    hardware = report.get("hardware") if isinstance(report.get("hardware"), dict) else {}
    gpu = hardware.get("gpu") or next((r.get("gpu") for r in records if r.get("gpu")), "") or "unknown GPU"
    e2e = (report.get("stages") or {}).get("e2e") if isinstance(report.get("stages"), dict) else None
    date = str(report.get("date") or report.get("created") or hardware.get("date")
               or next((r.get("date") for r in records if r.get("date")), "")
               or (e2e.get("date") if isinstance(e2e, dict) else "") or "")
    if re.match(r"\d{4}-\d{2}-\d{2}T", date):
        date = date[:10]  # the run is labelled by the day; each report keeps its full timestamp
    return str(gpu), date


def _source_of(report: dict) -> str:
    candidate = report.get("candidate") if isinstance(report.get("candidate"), dict) else {}
    return str(report.get("source") or candidate.get("source") or "")


def reports_import(*, path: Path, actor, thesis: Thesis | None = None) -> list[Run]:
    """Import every report under `path` (a folder or one file); returns the runs made (empty if
    these exact files were imported before)."""
    path = Path(path)
    files = _files(path)
    reports, records = [], []
    digest = hashlib.sha256()
    for file in files:
        data = _read(file)
        digest.update(file.name.encode() + b"\0" + file.read_bytes())
        if isinstance(data, list) and file.name == "latest.json":
            records.extend(r for r in data if isinstance(r, dict))
        elif isinstance(data, dict) and data.get("schema") == policy.REPORT_SCHEMA:
            reports.append((file, data))
    if not reports:
        raise ValidationError(f"{path}: no {policy.REPORT_SCHEMA} reports")
    sha = digest.hexdigest()
    if Run.objects.filter(imported_from=str(path), proposer_settings__sha256=sha).exists():
        return []

    by_target: dict[str, list] = {}
    for file, report in reports:
        by_target.setdefault(str(report.get("target") or "unknown"), []).append((file, report))
    runs = []
    with transaction.atomic():
        for target_name, items in sorted(by_target.items()):
            target = Target.objects.filter(name=target_name).first()
            if target is None:
                raise ValidationError(f"unknown target {target_name!r}: sync targets first")
            target_records = [r for r in records if r.get("target") == target_name]
            # a report's own records first (file <target>__<kernel>.json): another kernel's day is not its day
            devices = [_device_of(report, [r for r in target_records if r.get("kernel") == file.stem.split("__")[-1]]
                                  or target_records) for file, report in items]
            gpu = devices[0][0]
            days = sorted({day for _, day in devices if day})
            date = days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}" if days else ""
            hardware = kind_from_name(gpu) if gpu != "unknown GPU" else "unknown"
            run_thesis = thesis or Thesis.objects.filter(target=target, title=f"Imported results: {target_name}").first()
            if run_thesis is None:
                run_thesis = Thesis.objects.create(
                    title=f"Imported results: {target_name}", target=target, hardware=hardware, owner=actor,
                    body="Reports measured on a GPU and committed to the repository, loaded by import_reports.",
                    status=Thesis.Status.CONCLUDED)
            run = Run.objects.create(
                thesis=run_thesis, hardware=hardware, proposer=Run.Proposer.HUMAN, created_by=actor,
                proposer_settings={"sha256": sha, "files": [f.name for f, _ in items],
                                   "records": [r for r in records if r.get("target") == target_name]},
                budget_candidates=len(items), imported_from=str(path), imported_device=gpu, imported_date=date,
                status=Run.Status.RUNNING, notice=f"Imported: measured on {gpu}" + (f" on {date}" if date else "") + ".")
            for number, (file, report) in enumerate(items, start=1):
                source = _source_of(report) or _source_from_command(file)
                candidate = Candidate.objects.create(
                    run=run, number=number, source=source, source_hash=source_hash(source), proposer=PROPOSER,
                    params=report.get("params") if isinstance(report.get("params"), dict) else {},
                    proposal={"kind": "import", "file": file.name, "label": report.get("candidate_id")},
                    status=Candidate.Status.RUNNING, attempt=int(report.get("attempt") or 1))
                numbers = policy.summary_numbers(report)
                Evaluation.objects.create(candidate=candidate, attempt=candidate.attempt, worker=f"import:{gpu}",
                                          hardware_fingerprint=report.get("hardware") if isinstance(report.get("hardware"), dict)
                                          else {}, report=report, gpu_seconds=policy.gpu_seconds(report), **numbers)
                decision_apply(candidate=candidate, outcome=policy.decide(report, policy.RunPolicy.from_json(run.policy)))
            Run.objects.filter(pk=run.pk).update(status=Run.Status.FINISHED, finished=timezone.now(),
                                                 stop_reason=f"imported from {path}")
            run.refresh_from_db()
            event_write(type="run.imported", actor=actor, subject=run, run_id=run.pk, payload={
                "path": str(path), "device": gpu, "date": date, "reports": len(items), "sha256": sha})
            runs.append(run)
    return runs
