"""Load reports recorded on a GPU (bench/results/<gpu>/*.json, `ark.report/2` or a stored `ark.report/1`
converted by the contract, plus a latest.json list of per-kernel records) as finished runs, labelled
imported with their device and date.

One run per target in the folder. Each report becomes a candidate with its evaluation and the
policy's decision, exactly as if a worker had sent it. Importing the same reports again, from any path,
adds nothing: each candidate keeps its report's content key, and a report already imported is skipped.
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

from gpu_worker.contract import SCHEMA, SCHEMA_V1, ContractError, from_json, to_json
from gpu_worker.hardware import kind_from_name
from loop import keep, policy
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


def _records_in(file: Path, data) -> list[dict]:
    """The records of a latest.json file (its dicts); none for any other file."""
    return [r for r in data if isinstance(r, dict)] if file.name == "latest.json" and isinstance(data, list) else []


def records_for(path: Path) -> list[dict]:
    """The latest.json records that the reports under `path` take: those of the latest.json files _files finds."""
    return [r for file in _files(path) if file.name == "latest.json" for r in _records_in(file, _read(file))]


def _command_of(file: Path, records: list[dict]) -> str:
    """The command that wrote a report: its `.cmd` file, else the `command` of its records in latest.json
    (file <target>__<kernel>.json), which bench/collect_reports.py copies from that file."""
    cmd = file.with_suffix(".cmd")
    if cmd.is_file():
        return cmd.read_text(encoding="utf-8", errors="replace")
    target, _, kernel = file.stem.partition("__")
    return next((str(r["command"]) for r in records
                 if r.get("target") == target and r.get("kernel") == kernel and r.get("command")), "")


def _source_from_command(file: Path, records: list[dict]) -> str:
    """The candidate's source: a `.py` beside the report (kept where the file it was measured from has
    changed since, e.g. a best.py replaced by a later best), else the repository path named in the command
    that wrote it (`python -m gpu_worker evaluate --candidate <path> ...`), when that file is still there."""
    beside = file.with_suffix(".py")
    if beside.is_file():
        return beside.read_text(encoding="utf-8")
    match = _CANDIDATE_ARG.search(_command_of(file, records))
    if not match:
        return ""
    root = Path(settings.BASE_DIR).resolve()
    candidate = (root / match.group(1)).resolve()
    if not candidate.is_relative_to(root) or not candidate.is_file():
        return ""
    return candidate.read_text(encoding="utf-8")


def _device_of(report: dict, records: list[dict]) -> tuple[str, str]:
    """(GPU name, day) of a report as the contract writes it, else of its records in latest.json."""
    gpu = (report["hardware"] or {}).get("gpu") or next((r.get("gpu") for r in records if r.get("gpu")), "") \
        or "unknown GPU"
    e2e = report["stages"].get("e2e") or {}
    date = str(report["date"] or next((r.get("date") for r in records if r.get("date")), "") or e2e.get("date") or "")
    if re.match(r"\d{4}-\d{2}-\d{2}T", date):
        date = date[:10]  # the run is labelled by the day; each report keeps its full timestamp
    return str(gpu), date


def _read_report(file: Path, data: dict, records: list[dict]) -> tuple[dict, str]:
    """(the report through the contract, an ark.report/1 one converted once; the candidate's source). An
    import file may carry the source beside the report under `source`; else it is found by _source_from_command."""
    data = dict(data)
    source = data.pop("source", None)
    try:
        report = to_json(from_json(data))
    except ContractError as exc:
        raise ValidationError(f"{file.name}: {exc}") from exc
    return report, source if isinstance(source, str) else _source_from_command(file, records)


def content_key(report: dict, source: str) -> str:
    """What makes two imported reports the same: the report as the contract reads it and the kernel's
    source, whatever file or folder they came from."""
    text = json.dumps(report, sort_keys=True, separators=(",", ":")) + "\0" + (source or "")
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def reports_import(*, path: Path, actor, thesis: Thesis | None = None) -> list[Run]:
    """Import every report under `path` (a folder or one file); returns the runs made (empty if every
    report was imported before, from this path or another)."""
    path = Path(path)
    files = _files(path)
    found, records = [], []
    digest = hashlib.sha256()
    for file in files:
        data = _read(file)
        digest.update(file.name.encode() + b"\0" + file.read_bytes())
        records += _records_in(file, data)
        if isinstance(data, dict) and data.get("schema") in (SCHEMA, SCHEMA_V1):
            found.append((file, data))
    reports = [(file, *_read_report(file, data, records)) for file, data in found]  # after every latest.json
    if not reports:
        raise ValidationError(f"{path}: no {SCHEMA} or {SCHEMA_V1} reports")
    sha = digest.hexdigest()

    by_target: dict[str, list] = {}
    for file, report, source in reports:
        by_target.setdefault(str(report["target"] or "unknown"), []).append(
            (file, report, source, content_key(report, source)))
    runs = []
    with transaction.atomic():
        targets = {t.name: t for t in Target.objects.select_for_update().filter(name__in=list(by_target))}
        # under the targets' locks: a second import of the same reports, even at the same moment, finds
        # the first one's candidates and adds nothing
        if Run.objects.filter(proposer_settings__sha256=sha).exclude(imported_from="").exists():
            return []
        seen = set(Candidate.objects.filter(proposer=PROPOSER, proposal__content_key__in=[
            key for items in by_target.values() for *_, key in items]).values_list("proposal__content_key", flat=True))
        for target_name, items in sorted(by_target.items()):
            items = [(file, report, source) for file, report, source, key in items if key not in seen]
            if not items:
                continue
            target = targets.get(target_name)
            if target is None:
                raise ValidationError(f"unknown target {target_name!r}: sync targets first")
            target_records = [r for r in records if r.get("target") == target_name]
            # a report's own records first (file <target>__<kernel>.json): another kernel's day is not its day
            devices = [_device_of(report, [r for r in target_records if r.get("kernel") == file.stem.split("__")[-1]]
                                  or target_records) for file, report, _ in items]
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
                proposer_settings={"sha256": sha, "files": [f.name for f, _, _ in items],
                                   "records": [r for r in records if r.get("target") == target_name]},
                budget_candidates=len(items), imported_from=str(path), imported_device=gpu, imported_date=date,
                status=Run.Status.RUNNING,
                notice=f"Recorded on {gpu}" + (f", {date}" if date else "") + f". Imported from {path.name}/: not live.")
            for number, (file, report, source) in enumerate(items, start=1):
                candidate = Candidate.objects.create(
                    run=run, number=number, source=source, source_hash=source_hash(source), proposer=PROPOSER,
                    proposal={"kind": "import", "file": file.name, "label": report["candidate_id"],
                              "content_key": content_key(report, source)},
                    status=Candidate.Status.RUNNING, attempt=int(report["attempt"] or 1))
                numbers = policy.summary_numbers(report)
                Evaluation.objects.create(candidate=candidate, attempt=candidate.attempt, worker=f"import:{gpu}",
                                          hardware_fingerprint=report["hardware"] or {}, report=report,
                                          gpu_seconds=policy.gpu_seconds(report), **numbers)
                decision_apply(candidate=candidate, outcome=keep.decide(report, policy.RunPolicy.from_json(run.policy)))
            Run.objects.filter(pk=run.pk).update(status=Run.Status.FINISHED, finished=timezone.now(),
                                                 stop_reason=f"imported from {path}")
            run.refresh_from_db()
            event_write(type="run.imported", actor=actor, subject=run, run_id=run.pk, payload={
                "path": str(path), "device": gpu, "date": date, "reports": len(items), "sha256": sha})
            runs.append(run)
    return runs
