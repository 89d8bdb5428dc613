"""Read what a person imports: a FlashInfer-Bench Definition (JSON) and its workloads (JSONL of workload
Traces, as FlashInfer-Bench's tracing writes them), through the package's own classes, into an imported-target
document (docs/interop.md)."""

from __future__ import annotations

import json
from collections import Counter

from flashinfer_bench import Definition, Trace
from pydantic import ValidationError

from .document import SCHEMA, DocumentError, check_document, constraint_problems, parse_ranges


def _first_error(exc: ValidationError) -> str:
    e = exc.errors()[0]
    where = ".".join(str(p) for p in e.get("loc", ())) or "document"
    return f"{where}: {e.get('msg')}"


def read_definition(text: str) -> Definition:
    try:
        return Definition.model_validate_json(text)
    except ValidationError as exc:
        raise DocumentError(f"not a FlashInfer-Bench Definition: {_first_error(exc)}") from None


def _workload_traces(defn: Definition, jsonl: str):
    """Each line as a workload Trace of this definition with a value for every var axis meeting the
    constraints, or DocumentError naming the line."""
    for n, line in enumerate((jsonl or "").splitlines(), 1):
        if not line.strip():
            continue
        try:
            trace = Trace.model_validate_json(line)
        except ValidationError as exc:
            raise DocumentError(f"workloads line {n}: not a FlashInfer-Bench workload trace: {_first_error(exc)}") from None
        if trace.definition != defn.name:
            raise DocumentError(f"workloads line {n}: for definition {trace.definition!r}, not {defn.name!r}")
        axes = trace.workload.axes
        missing = [a for a in defn.var_axes if a not in axes]
        if missing:
            raise DocumentError(f"workloads line {n}: no value for var axis {', '.join(missing)}")
        problems = constraint_problems(json.loads(defn.model_dump_json()), {a: axes[a] for a in defn.var_axes})
        if problems:
            raise DocumentError(f"workloads line {n}: {problems[0]}")
        yield trace


def workload_cells(defn: Definition, jsonl: str) -> list[tuple[dict, float]]:
    """[(var axes, weight)]: each line is a workload Trace of this definition; a cell's weight is how many
    lines name it (a tracing run writes one per served call it keeps)."""
    counts: Counter = Counter(tuple((a, int(t.workload.axes[a])) for a in defn.var_axes)
                              for t in _workload_traces(defn, jsonl))
    return [(dict(key), float(w)) for key, w in sorted(counts.items())]


def captured_inputs(definition_text: str, jsonl: str) -> dict[str, int]:
    """{input: how many workload lines name a captured safetensors blob for it}. ark reads a workload's axes
    only and draws every input itself (docs/interop.md): the import says so rather than dropping them quietly."""
    defn = read_definition(definition_text)
    counts: Counter = Counter(name for t in _workload_traces(defn, jsonl)
                              for name, spec in t.workload.inputs.items() if spec.type == "safetensors")
    return dict(sorted(counts.items()))


def build_document(definition_text: str, workloads_text: str = "", ranges=None, tolerance=None, inputs=None,
                   check=None) -> dict:
    """The imported-target document, or DocumentError naming what is wrong. Without a range for an axis, the
    imported workloads' span is taken when there are any. `inputs`: generators of inputs the Definition cannot
    describe (gpu_worker/fib/generators.py); `check`: a built-in target whose check replaces the per-output
    tolerance."""
    defn = read_definition(definition_text)
    cells = workload_cells(defn, workloads_text)
    spans = parse_ranges(ranges or [])
    for axis in defn.var_axes:
        if axis not in spans and cells:
            values = [c[axis] for c, _ in cells]
            spans[axis] = [min(values), max(values)]
    doc = {"schema": SCHEMA, "definition": json.loads(defn.model_dump_json()), "ranges": spans,
           "cells": [{"axes": c, "weight": w} for c, w in cells]}
    if tolerance:
        doc["tolerance"] = {k: float(v) for k, v in tolerance.items()}
    if inputs:
        doc["inputs"] = inputs
    if check:
        doc["check"] = check
    check_document(doc)
    if inputs or check:
        _reference_passes(doc)
    return doc


def _reference_passes(doc: dict) -> None:
    """With ark's generators or a built-in check, the Definition's own reference must pass that check on
    ark's inputs at the smallest verification shape: a declaration that does not fit the Definition (a
    check of another contract, lengths the reference cannot read) is refused on import, not on every run."""
    from ..targets import get_target  # local: torch and the built-in targets load only here

    target = get_target(doc["definition"]["name"], doc)
    shapes = sorted(target.verification_shapes("smoke"), key=target.bytes_min)
    if not shapes:
        raise DocumentError("no valid shape in the operating range to try the reference on")
    shape = shapes[0]
    try:
        inputs = target.make_inputs(shape, 1, "cpu")
        ok, _, message = target.check(target.baseline(*inputs), inputs, target.reference(inputs))
    except Exception as exc:  # noqa: BLE001 - any failure of the Definition's code on ark's inputs is the answer
        ok, message = False, f"{type(exc).__name__}: {exc}"
    if not ok:
        axes = {k: v for k, v in shape.items() if k != "values"}
        raise DocumentError(f"the definition's own reference does not pass the declared check on ark's inputs "
                            f"at {axes}: {message}")
