"""FlashInfer-Bench interop on the web side (docs/interop.md): import a Definition (+ workloads) as a Target,
export a run as a TraceSet directory, write the apply-ready TraceSet of a promotion.

FlashInfer-Bench imports torch, and the console and loop never do: every call that needs the package runs
`python -m gpu_worker.fib` in a child process, JSON in and out. Here only rows and events are written.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction

from gpu_worker.fib.document import DEFAULT_TOLERANCE, DocumentError, parse_ranges, var_axes
from gpu_worker.fib.generators import GeneratorError, check_generators
from gpu_worker.target_catalog import CATALOG
from loop.audit import event_write
from loop.models import Candidate, Run, ServingConfig, Target
from loop.roles import EDIT_THESIS, check_permission
from loop.services.workloads import workload_profile_set

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 300


def fib_call(command: str, payload: dict, *, timeout: float = TIMEOUT_S) -> dict:
    """Run `python -m gpu_worker.fib <command>`; its answer, or ValidationError with its message."""
    try:
        done = subprocess.run([sys.executable, "-m", "gpu_worker.fib", command], input=json.dumps(payload),
                              capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False)
    except subprocess.TimeoutExpired:
        raise ValidationError(f"FlashInfer-Bench {command} took longer than {timeout:.0f} s") from None
    try:
        answer = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        tail = (done.stderr or "").strip().splitlines()[-1:] or ["no output"]
        raise ValidationError(f"FlashInfer-Bench {command} failed: {tail[0][:300]}") from None
    if not answer.get("ok"):
        raise ValidationError(answer.get("error") or f"FlashInfer-Bench {command} failed")
    return answer


def _precheck(definition_text: str, workloads_text: str, ranges, inputs: dict | None, check: str | None) -> None:
    """What can be said without the package (no child process): the ranges' syntax, a var axis with
    neither a range nor workloads to take one from, input generators that do not fit the definition, a
    check that names no built-in target."""
    try:
        spans = parse_ranges(list(ranges))
    except DocumentError as exc:
        raise ValidationError(str(exc)) from None
    try:
        definition = json.loads(definition_text)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"the definition is not JSON: {exc}") from None
    if not isinstance(definition, dict):
        raise ValidationError("the definition must be a JSON object (a FlashInfer-Bench Definition)")
    missing = [a for a in var_axes(definition) if a not in spans]
    if missing and not (workloads_text or "").strip():
        raise ValidationError(f"no operating range for var axis {', '.join(missing)} "
                              f"(give --range {missing[0]}=lo:hi, or workloads to take it from)")
    try:
        check_generators(definition, inputs or {})
    except GeneratorError as exc:
        raise ValidationError(str(exc)) from None
    if check and check not in CATALOG:
        raise ValidationError(f"check {check!r}: not a built-in target (built-in: {', '.join(sorted(CATALOG))})")


def fib_definition_import(*, actor, definition_text: str, workloads_text: str = "", ranges=(),
                          tolerance: dict | None = None, source: str = "", inputs: dict | None = None,
                          check: str | None = None) -> Target:
    """Create or replace the Target a FlashInfer-Bench Definition describes; its workloads, if any, become
    the target's workload profile (weights per cell). `inputs` declares generators for inputs the
    Definition cannot describe, `check` a built-in target whose check replaces the per-output tolerance
    (docs/interop.md). A built-in target's name is refused. The returned target's `captured_inputs` counts
    the workload lines naming captured safetensors inputs, which ark does not read."""
    check_permission(actor, EDIT_THESIS)
    _precheck(definition_text, workloads_text, ranges, inputs, check)
    name = json.loads(definition_text).get("name")
    if Target.objects.filter(name=str(name), document={}).exists():
        raise ValidationError(f"{name} is a built-in target; an imported definition may not replace it")
    answer = fib_call("read", {"definition": definition_text, "workloads": workloads_text, "ranges": list(ranges),
                               "tolerance": tolerance, "inputs": inputs or None, "check": check or None})
    doc, captured = answer["document"], answer.get("captured") or {}
    d = doc["definition"]
    fields = {"version": "1", "description": (d.get("description") or d["name"])[:2000],
              "axes": doc["ranges"], "dsls": ["triton", "cute"], "e2e_slot": "", "document": doc}
    with transaction.atomic():
        target = Target.objects.select_for_update().filter(name=d["name"]).first()
        if target is not None and not target.document:
            raise ValidationError(f"{d['name']} is a built-in target; an imported definition may not replace it")
        if target is None:
            target = Target.objects.create(name=d["name"], **fields)
        else:
            Target.objects.filter(pk=target.pk).update(**fields)
            target.refresh_from_db()
        event_write(type="target.imported", actor=actor, subject=target, payload={
            "name": target.name, "ranges": doc["ranges"], "cells": len(doc.get("cells") or []),
            "source": source[:200], "format": "flashinfer-bench", "inputs": doc.get("inputs") or {},
            "check": doc.get("check"), "captured_inputs_not_read": captured})
        if doc.get("cells"):
            workload_profile_set(target, [(c["axes"], c["weight"]) for c in doc["cells"]], actor=actor,
                                 source=f"fib:{source}"[:200])
    target.captured_inputs = captured  # for the answer to the person importing; the event keeps it too
    return target


def imported_targets() -> list[dict]:
    """The imported targets as the console lists them: ranges, how each input is drawn, the check."""
    rows = []
    for target in Target.objects.exclude(document={}).order_by("name"):
        doc = target.document
        declared = doc.get("inputs") or {}
        rows.append({"name": target.name, "ranges": doc.get("ranges") or {}, "cells": len(doc.get("cells") or []),
                     "inputs": [{"name": n, "drawn_by": (f"ark: {declared[n]['kind']}" if n in declared else "FlashInfer-Bench"),
                                 "params": {k: v for k, v in (declared.get(n) or {}).items() if k != "kind"}}
                                for n in (doc.get("definition") or {}).get("inputs") or {}],
                     "check": (f"{doc['check']}'s check" if doc.get("check") else
                               "FlashInfer-Bench per-output tolerance " + ", ".join(
                                   f"{k} {v:g}" for k, v in {**DEFAULT_TOLERANCE, **(doc.get("tolerance") or {})}.items()))})
    return rows


def _candidate_payload(candidate: Candidate) -> dict:
    reports = [e.report for e in candidate.evaluations.order_by("attempt")]
    dsl = "cute" if "cutlass" in candidate.source else "triton"
    return {"name": f"ark_{candidate.run.thesis.target.name}_r{candidate.run_id}_c{candidate.number}",
            "source": candidate.source, "author": candidate.proposer, "dsl": dsl, "status": candidate.status,
            "reports": reports}


def fib_traceset_export(*, run: Run, out: str | Path) -> dict:
    """The run as a TraceSet directory at `out` (replaced): the definition, each evaluated candidate as a
    Solution, each evaluation's shapes as Traces, the target's workloads."""
    target = run.thesis.target
    if not target.document:
        raise ValidationError(f"{target.name} is a built-in target with no FlashInfer-Bench definition; "
                              "export works on imported targets")
    candidates = run.candidates.filter(evaluations__isnull=False).distinct().order_by("number")
    payload = {"document": target.document, "candidates": [_candidate_payload(c) for c in candidates],
               "out": str(Path(out).resolve())}
    return fib_call("export", payload)


def promotion_dir(config: ServingConfig) -> Path:
    return Path(settings.SERVING_EXPORT_DIR) / config.target.name / config.hardware / f"fib-v{config.version}"


def fib_promotion_export(*, config: ServingConfig) -> dict | None:
    """For an imported target, the TraceSet `flashinfer_bench.apply` loads to serve what this serving-config
    version routes (None for a built-in target)."""
    if not config.target.document:
        return None
    return fib_call("promote", {"document": config.target.document, "serving_config": config.document,
                                "out": str(promotion_dir(config).resolve())})

