"""The imported-target document (`"schema": "ark.fib-target/1"`): a FlashInfer-Bench Definition plus what ark
needs and a Definition does not say. Standard library only: the loop stores it on the Target row and puts it
in every evaluation spec of that target, and the worker builds the target from it (docs/interop.md).

    {"schema": "ark.fib-target/1",
     "definition": {... a FlashInfer-Bench Definition, as its own JSON ...},
     "ranges": {"batch_size": [1, 16384]},        # the operating range of every var axis, inclusive
     "cells": [{"axes": {"batch_size": 64}, "weight": 12}, ...],   # imported workloads: grid + weights
     "tolerance": {"atol": 0.01, "rtol": 0.01},   # FlashInfer-Bench's per-output check
     "inputs": {"seq_lens": {"kind": "lengths", "max": "..."}, ...},   # optional: gpu_worker/fib/generators.py
     "check": "dsa_indexer_topk_fp8"}             # optional: a built-in target's stronger check
"""

from __future__ import annotations

import hashlib
import json

from ..target_catalog import CATALOG, DENSE_FORBIDDEN, NORM_FORBIDDEN, TOPK_FORBIDDEN, TargetInfo
from .generators import GeneratorError, check_generators, evaluate, generator_problems

SCHEMA = "ark.fib-target/1"
DEFAULT_TOLERANCE = {"atol": 1e-2, "rtol": 1e-2}  # FlashInfer-Bench's BenchmarkConfig defaults
_KEYS = {"schema", "definition", "ranges", "cells", "tolerance", "inputs", "check"}


class DocumentError(ValueError):
    """An imported-target document was refused; the message names every problem."""


def var_axes(definition: dict) -> list[str]:
    return [name for name, axis in (definition.get("axes") or {}).items() if (axis or {}).get("type") == "var"]


def const_axes(definition: dict) -> dict[str, int]:
    return {name: axis["value"] for name, axis in (definition.get("axes") or {}).items()
            if (axis or {}).get("type") == "const"}


def constraint_problems(definition: dict, axes: dict[str, int]) -> list[str]:
    """The Definition's constraints that `axes` (var values; const ones are added) breaks. The expressions
    are the Definition's own; they see only the axis values, no builtins."""
    env = {**const_axes(definition), **axes}
    problems = []
    for expr in definition.get("constraints") or []:
        try:
            ok = bool(evaluate(expr, env))
        except (NameError, TypeError, ValueError, ArithmeticError) as exc:  # e.g. an axis the shape lacks
            problems.append(f"constraint {expr!r} cannot be evaluated on {axes}: {exc}")
            continue
        if not ok:
            problems.append(f"constraint {expr!r} does not hold for {axes}")
    return problems


def shape_problems(doc: dict, axes: dict[str, int]) -> list[str]:
    """Why these var-axis values are no valid shape of the imported target: the Definition's constraints,
    then what its declared input generators need (a page table wide enough for the longest row, ...)."""
    definition = doc["definition"]
    return constraint_problems(definition, axes) + generator_problems(
        definition, doc.get("inputs") or {}, {**const_axes(definition), **axes})


def check_of(doc: dict) -> str | None:
    """The built-in target whose check (and exact reference) the imported target uses instead of
    FlashInfer-Bench's per-output tolerance, or None."""
    return doc.get("check") or None


def parse_ranges(items) -> dict[str, list[int]]:
    """`axis=lo:hi` strings (CLI, console form) or a mapping -> {axis: [lo, hi]}."""
    if isinstance(items, dict):
        return {str(k): [int(v[0]), int(v[1])] for k, v in items.items()}
    out: dict[str, list[int]] = {}
    for item in items or []:
        name, sep, span = str(item).partition("=")
        lo, sep2, hi = span.partition(":")
        try:
            if not sep or not sep2:
                raise ValueError
            out[name.strip()] = [int(lo), int(hi)]
        except ValueError:
            raise DocumentError(f"range {item!r}: expected axis=lo:hi with integers, e.g. batch_size=1:16384")
    return out


def check_document(doc: dict) -> dict:
    """Refuse a document whose ranges do not bound exactly the var axes, whose cells lie outside them or
    cannot be drawn, whose input generators or built-in check do not fit the Definition, or where no corner
    of the range is a valid shape."""
    problems = []
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise DocumentError(f"not an imported-target document: 'schema' must be {SCHEMA!r}")
    extra = sorted(set(doc) - _KEYS)
    if extra:
        problems.append(f"unknown keys {extra}")
    definition, ranges = doc.get("definition") or {}, doc.get("ranges") or {}
    names = var_axes(definition)
    missing = [a for a in names if a not in ranges]
    if missing:
        problems.append(f"no operating range for var axis {', '.join(missing)} (give --range {missing[0]}=lo:hi)")
    unknown = sorted(set(ranges) - set(names))
    if unknown:
        problems.append(f"{', '.join(unknown)} is not a var axis of {definition.get('name')} (var axes: "
                        f"{', '.join(names) or 'none'})")
    for axis, span in ranges.items():
        if (not isinstance(span, list) or len(span) != 2 or not all(isinstance(v, int) for v in span)
                or span[0] < 0 or span[1] < span[0]):
            problems.append(f"range of {axis}: expected [lo, hi] with 0 <= lo <= hi, got {span!r}")
    try:
        check_generators(definition, doc.get("inputs") or {})
    except GeneratorError as exc:
        problems.append(str(exc))
    builtin = doc.get("check")
    if builtin is not None:
        info = CATALOG.get(builtin) if isinstance(builtin, str) else None
        if info is None:
            problems.append(f"check {builtin!r}: not a built-in target (built-in: {', '.join(sorted(CATALOG))})")
        elif len(info.arg_names) != len(definition.get("inputs") or {}):
            problems.append(f"check {builtin}: that target takes {len(info.arg_names)} inputs "
                            f"({', '.join(info.arg_names)}), the definition {len(definition.get('inputs') or {})}")
    if problems:
        raise DocumentError("; ".join(problems))
    for i, cell in enumerate(doc.get("cells") or []):
        axes = cell.get("axes") or {}
        outside = [a for a in names if not ranges[a][0] <= axes.get(a, -1) <= ranges[a][1]]
        if outside:
            problems.append(f"workload {i} {axes}: {', '.join(outside)} outside the operating range")
        elif doc.get("inputs"):
            problems += [f"workload {i} {axes}: {p}" for p in shape_problems(doc, {a: axes[a] for a in names})]
    corners = [{a: lo for a, (lo, _) in ranges.items()}, {a: hi for a, (_, hi) in ranges.items()}]
    corners += [dict(corners[0], **{a: hi}) for a, (_, hi) in ranges.items()]
    if not problems and all(shape_problems(doc, c) for c in corners):
        problems.append(f"no corner of the operating range is a valid shape: at {corners[0]}, "
                        + "; ".join(shape_problems(doc, corners[0])))
    if problems:
        raise DocumentError("; ".join(problems[:5]) + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""))
    return doc


def document_hash(doc: dict) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def target_info(doc: dict):
    """What the web side knows of an imported target without torch (the catalog's TargetInfo): the guard in
    the console's check, prompts. The worker builds the same names from the same document."""
    definition = doc["definition"]
    builtin = CATALOG.get(check_of(doc) or "")
    return TargetInfo(
        name=definition["name"], version=1, description=definition.get("description") or definition["name"],
        axes={a: tuple(v) for a, v in doc["ranges"].items()}, dsls=("triton", "cute"),
        arg_names=tuple(definition.get("inputs") or ()),
        forbidden_torch=TOPK_FORBIDDEN | DENSE_FORBIDDEN | NORM_FORBIDDEN,
        tolerance=dict(builtin.tolerance) if builtin else {**DEFAULT_TOLERANCE, **(doc.get("tolerance") or {})},
        axis_classes={a: (tuple(v),) for a, v in doc["ranges"].items()})
