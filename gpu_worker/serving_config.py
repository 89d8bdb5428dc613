"""Serving config (`"schema": "ark.serving/1"`): parse and validate, all or nothing. Standard library only:
the console validates a config with the same parser the GPU side loads it with, without torch.

    {"schema": "ark.serving/1", "target": "dsa_topk", "hardware": "h200", "version": 3,
     "axis": "n_ctx", "fallback": "default",
     "routes": [{"lo": 0, "hi": 100000, "kernel": {"candidate_id": "c42", "params": {...},
                  "source_hash": "sha256:<hex>", "source_path": "c42.py"}},
                {"lo": 100000, "hi": null, "kernel": "default"}]}

Ranges are half-open [lo, hi); hi null means unbounded. Whatever no route covers goes to the
fallback, which must be "default"; without a fallback the routes must cover [0, inf).

Over a target's two operating axes (docs/domain.md, Winning regions) a config names "axes" instead of
"axis", and each route is a box with explicit bounds on every axis and, optionally, the evidence it was
promoted on; boxes may not overlap and the fallback is required (a shape outside every box is served by
the default, never by the nearest box):

    {..., "axes": ["rows", "n_ctx"], "fallback": "default",
     "routes": [{"bounds": {"rows": [1, 5], "n_ctx": [4096, 131073]}, "kernel": {...},
                 "evidence": {"candidate": 42, "evaluation": 7, "cells": [...]}}]}
"""

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

SCHEMA = "ark.serving/1"
AXES = ("n_ctx", "bytes")  # context length (top-k), message size (all-reduce)
# A box may bound any axis of its target, a built-in one (rows, n_ctx, tokens, hidden, batch, context, bytes)
# or an imported Definition's var axis (batch_size, num_pages, ...): a lower-case identifier.
GRID_AXIS_NAME = re.compile(r"[a-z_][a-z0-9_]{0,63}")
_TOP_KEYS = {"schema", "target", "hardware", "version", "axis", "axes", "routes", "fallback"}
_ROUTE_KEYS = {"lo", "hi", "kernel"}
_BOX_KEYS = {"bounds", "kernel", "evidence"}
_KERNEL_KEYS = {"candidate_id", "source_hash", "params", "source_path", "source"}
_HASH = re.compile(r"^sha256:[0-9a-f]{64}$")


class ServingConfigError(ValueError):
    """A serving config was refused; `problems` lists every reason, the message joins them."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("serving config refused: " + "; ".join(self.problems))


@dataclass(frozen=True)
class CandidateKernel:
    candidate_id: str
    source: str
    source_hash: str
    params: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Route:
    lo: int
    hi: int | None
    kernel: CandidateKernel | None  # None: the default kernel
    bounds: tuple = ()  # ((axis, lo, hi), ...) for a box; a 1-D route's is ((axis, lo, hi),)
    evidence: dict | None = None

    def contains(self, value: int) -> bool:
        return self.lo <= value and (self.hi is None or value < self.hi)

    def contains_shape(self, shape: dict) -> bool:
        """Inside on every bounded axis; an axis the shape does not give never matches."""
        return all(shape.get(axis) is not None and lo <= shape[axis] and (hi is None or shape[axis] < hi)
                   for axis, lo, hi in self.bounds)


@dataclass(frozen=True)
class RouteTable:
    """A serving-config document, parsed and checked: which kernel serves each range of the axis.
    (The database's `loop.models.ServingConfig` is a stored, versioned document; this is what dispatch reads.)"""

    target: str
    hardware: str
    version: int
    axis: str
    routes: tuple[Route, ...]
    raw: dict
    axes: tuple[str, ...] = ()

    def route_for(self, shape: dict) -> tuple[int | None, Route | None]:
        """(index, route) serving `shape`, or (None, None): the fallback (the default kernel) serves it."""
        for i, route in enumerate(self.routes):
            if route.contains_shape(shape):
                return i, route
        return None, None

    @property
    def sha256(self) -> str:
        return hashlib.sha256(json.dumps(self.raw, sort_keys=True).encode()).hexdigest()


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _fmt(lo, hi) -> str:
    return f"[{lo}, {'inf' if hi is None else hi})"


def parse_serving_config(
    data, *, base_dir: str | Path | None = None, target: str | None = None
) -> RouteTable:
    """Validate `data` (dict, JSON text or bytes); raise ServingConfigError naming each problem."""
    if isinstance(data, (bytes, bytearray)):
        data = data.decode("utf-8", errors="replace")
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as exc:
            raise ServingConfigError([f"bad schema: not JSON ({exc})"]) from None
    if not isinstance(data, dict):
        raise ServingConfigError([f"bad schema: expected a JSON object, got {type(data).__name__}"])

    problems: list[str] = []
    if data.get("schema") != SCHEMA:
        problems.append(f"bad schema: 'schema' must be {SCHEMA!r}, got {data.get('schema')!r}")
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        problems.append(f"bad schema: unknown keys {unknown}")
    for key in ("target", "hardware"):
        if not isinstance(data.get(key), str) or not data.get(key):
            problems.append(f"bad schema: '{key}' must be a non-empty string")
    if target is not None and isinstance(data.get("target"), str) and data["target"] != target:
        problems.append(
            f"target mismatch: config is for {data['target']!r}, this dispatcher serves {target!r}"
        )
    if not _is_int(data.get("version")) or data["version"] < 1:
        problems.append(f"bad schema: 'version' must be a positive integer, got {data.get('version')!r}")
    boxes = "axes" in data
    if boxes:
        axes = data["axes"]
        if "axis" in data:
            problems.append("bad schema: give 'axis' (one axis) or 'axes' (a grid), not both")
        if (not isinstance(axes, list) or not axes or len(set(map(str, axes))) != len(axes)
                or any(not isinstance(a, str) or not GRID_AXIS_NAME.fullmatch(a) for a in axes)):
            problems.append(f"bad schema: 'axes' must be distinct axis names (lower-case identifiers), got {axes!r}")
            raise ServingConfigError(problems)
        if data.get("fallback") != "default":
            problems.append("bad schema: a config over 'axes' needs 'fallback': 'default'")
    elif data.get("axis") not in AXES:
        problems.append(f"bad schema: 'axis' must be one of {list(AXES)}, got {data.get('axis')!r}")
    has_fallback = "fallback" in data
    if has_fallback and data["fallback"] != "default":
        problems.append(f"bad schema: 'fallback' must be 'default', got {data['fallback']!r}")
    routes_raw = data.get("routes")
    if not isinstance(routes_raw, list):
        problems.append("bad schema: 'routes' must be a list")
        raise ServingConfigError(problems)

    if boxes:
        routes = _parse_boxes(routes_raw, data["axes"], base_dir, problems)
        if problems:
            raise ServingConfigError(problems)
        return RouteTable(data["target"], data["hardware"], data["version"], " x ".join(data["axes"]),
                          tuple(routes), data, tuple(data["axes"]))
    routes: list[Route] = []
    shape_ok = True
    for i, r in enumerate(routes_raw):
        where = f"route {i}"
        if not isinstance(r, dict):
            problems.append(f"bad schema: {where} must be an object")
            shape_ok = False
            continue
        extra = sorted(set(r) - _ROUTE_KEYS)
        if extra:
            problems.append(f"bad schema: {where} has unknown keys {extra}")
        lo, hi = r.get("lo"), r.get("hi")
        if not _is_int(lo) or lo < 0:
            problems.append(f"bad schema: {where} 'lo' must be an integer >= 0, got {lo!r}")
            shape_ok = False
            continue
        if hi is not None and (not _is_int(hi) or hi <= lo):
            problems.append(f"bad schema: {where} 'hi' must be null or an integer > lo={lo}, got {hi!r}")
            shape_ok = False
            continue
        kernel = _parse_kernel(r.get("kernel"), where, base_dir, problems)
        routes.append(Route(lo, hi, kernel, ((data.get("axis"), lo, hi),)))

    if shape_ok:
        for i in range(1, len(routes)):
            a, b = routes[i - 1], routes[i]
            if b.lo < a.lo:
                problems.append(
                    f"routes not sorted: route {i} {_fmt(b.lo, b.hi)} comes after {_fmt(a.lo, a.hi)}"
                )
            elif a.hi is None or b.lo < a.hi:
                problems.append(
                    f"routes overlap: route {i - 1} {_fmt(a.lo, a.hi)} and route {i} {_fmt(b.lo, b.hi)}"
                )
        if not has_fallback:
            gap = _first_gap(routes)
            if gap is not None:
                problems.append(
                    f"gap not covered: {_fmt(*gap)} has no route and there is no 'fallback': 'default'"
                )

    if problems:
        raise ServingConfigError(problems)
    return RouteTable(data["target"], data["hardware"], data["version"], data["axis"], tuple(routes), data,
                      (data["axis"],))


def _parse_boxes(routes_raw: list, axes: list[str], base_dir, problems: list[str]) -> list[Route]:
    routes = []
    for i, r in enumerate(routes_raw):
        where = f"route {i}"
        if not isinstance(r, dict):
            problems.append(f"bad schema: {where} must be an object")
            continue
        extra = sorted(set(r) - _BOX_KEYS)
        if extra:
            problems.append(f"bad schema: {where} has unknown keys {extra}")
        bounds = r.get("bounds")
        if not isinstance(bounds, dict) or sorted(bounds) != sorted(axes):
            problems.append(f"bad schema: {where} 'bounds' must give [lo, hi] for each of {axes}, got {bounds!r}")
            continue
        box = []
        for axis in axes:
            pair = bounds[axis]
            lo, hi = (pair + [None, None])[:2] if isinstance(pair, list) and len(pair) == 2 else (None, None)
            if not _is_int(lo) or lo < 0 or (hi is not None and (not _is_int(hi) or hi <= lo)):
                problems.append(f"bad schema: {where} {axis} bounds must be [lo >= 0, hi > lo or null], got {pair!r}")
                break
            box.append((axis, lo, hi))
        else:
            evidence = r.get("evidence")
            if evidence is not None and not isinstance(evidence, dict):
                problems.append(f"bad schema: {where} 'evidence' must be an object")
            kernel = _parse_kernel(r.get("kernel"), where, base_dir, problems)
            routes.append(Route(box[0][1], box[0][2], kernel, tuple(box), evidence if isinstance(evidence, dict) else None))
    for (i, a), (j, b) in ((p, q) for p in enumerate(routes) for q in enumerate(routes) if p[0] < q[0]):
        if all(alo < (bhi if bhi is not None else alo + 1) and blo < (ahi if ahi is not None else blo + 1)
               for (_, alo, ahi), (_, blo, bhi) in zip(a.bounds, b.bounds)):
            problems.append(f"routes overlap: route {i} {_box(a)} and route {j} {_box(b)}")
    return routes


def _box(route: Route) -> str:
    return " x ".join(f"{axis} {_fmt(lo, hi)}" for axis, lo, hi in route.bounds)


def _first_gap(routes: list[Route]):
    at = 0
    for r in sorted(routes, key=lambda r: r.lo):
        if r.lo > at:
            return (at, r.lo)
        if r.hi is None:
            return None
        at = max(at, r.hi)
    return (at, None)


def _parse_kernel(k, where: str, base_dir, problems: list[str]) -> CandidateKernel | None:
    if k == "default":
        return None
    if not isinstance(k, dict):
        problems.append(f"bad schema: {where} 'kernel' must be 'default' or an object, got {k!r}")
        return None
    extra = sorted(set(k) - _KERNEL_KEYS)
    if extra:
        problems.append(f"bad schema: {where} kernel has unknown keys {extra}")
    cid = k.get("candidate_id")
    if not isinstance(cid, str) or not cid:
        problems.append(f"bad schema: {where} kernel needs a 'candidate_id' string")
        cid = "?"
    params = k.get("params", {})
    if not isinstance(params, dict):
        problems.append(f"bad schema: {where} kernel {cid} 'params' must be an object")
        params = {}
    declared = k.get("source_hash")
    if not isinstance(declared, str) or not _HASH.match(declared):
        problems.append(
            f"bad schema: {where} kernel {cid} 'source_hash' must be 'sha256:<64 hex>', got {declared!r}"
        )
    if ("source" in k) == ("source_path" in k):
        problems.append(
            f"missing source: {where} kernel {cid} needs exactly one of 'source' or 'source_path'"
        )
        return None
    if "source" in k:
        source = k["source"]
        if not isinstance(source, str) or not source.strip():
            problems.append(f"missing source: {where} kernel {cid} has an empty inline 'source'")
            return None
    else:
        path = Path(k["source_path"]) if isinstance(k["source_path"], str) else None
        if path is not None and not path.is_absolute() and base_dir is not None:
            path = Path(base_dir) / path
        if path is None or not path.is_file():
            problems.append(
                f"missing source: {where} kernel {cid} source_path {k['source_path']!r} not found"
            )
            return None
        source = path.read_text(encoding="utf-8")
    actual = "sha256:" + hashlib.sha256(source.encode("utf-8")).hexdigest()
    if isinstance(declared, str) and _HASH.match(declared) and declared != actual:
        problems.append(f"hash mismatch: {where} kernel {cid} declares {declared}, its source is {actual}")
    return CandidateKernel(cid, source, actual, dict(params))
