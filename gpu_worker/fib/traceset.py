"""ark's records in FlashInfer-Bench's own classes (docs/interop.md): a candidate as a Solution, an evaluation
as Traces, a run as a TraceSet directory, and a promotion as a TraceSet that `flashinfer_bench.apply` serves
exactly as the serving config routes it."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import shutil
from pathlib import Path

from flashinfer_bench import (
    BuildSpec,
    Correctness,
    Definition,
    Environment,
    Evaluation,
    EvaluationStatus,
    Performance,
    RandomInput,
    Solution,
    SourceFile,
    Trace,
    TraceSet,
    Workload,
)
from flashinfer_bench.data.json_utils import save_json_file

from ..contract import from_json, to_json

ENTRY = "kernel.py::forward"  # ark's candidates define forward(*inputs) and return the outputs
# The most apply keys a promotion TraceSet lists to cover its routes point by point (docs/interop.md,
# "Promotion an engine can load"): all 16384 batch sizes of a one-axis target's range fit.
MAX_KEYS = 16384


def solution_of(defn: Definition, *, name: str, source: str, author: str, dsl: str = "triton",
                description: str = "") -> Solution:
    """A candidate as a Solution: value-returning (not destination-passing), one source file. CuTe DSL is
    Python to FlashInfer-Bench's builders."""
    return Solution(
        name=name, definition=defn.name, author=author or "ark", description=description or None,
        spec=BuildSpec(language="triton" if dsl == "triton" else "python", target_hardware=["cuda"],
                       entry_point=ENTRY, destination_passing_style=False),
        sources=[SourceFile(path="kernel.py", content=source)])


def workload_of(defn: Definition, shape: dict) -> Workload:
    axes = {a: int(shape[a]) for a in defn.var_axes}
    uuid = hashlib.sha1(json.dumps([defn.name, sorted(axes.items())]).encode()).hexdigest()[:16]
    return Workload(axes=axes, inputs={name: RandomInput() for name in defn.inputs}, uuid=uuid)


def _environment(report: dict) -> Environment:
    hw = report.get("hardware") or {}
    libs = {k: str(hw[k]) for k in ("driver", "sm_clock_mhz", "mem_clock_mhz") if hw.get(k) is not None}
    libs["ark.report"] = str(report.get("schema"))
    return Environment(hardware=hw.get("gpu") or hw.get("kind") or report.get("mode") or "unknown", libs=libs)


def _us(timing: dict | None, stat: str) -> float | None:
    timing = timing or {}
    return timing.get(f"{stat}_us") if timing.get(f"{stat}_us") is not None else timing.get("median_us")


def traces_of(defn: Definition, solution: str, report: dict) -> tuple[list[Trace], int]:
    """One Trace per verified-and-failed shape and per timed benchmark shape of the report; returns the
    traces and how many passing shapes had no timing (a CPU worker times nothing: they are left out, since
    a PASSED Trace must carry a latency). Interval and p99 go in the Trace's log as one JSON line, since
    Performance has no field for them."""
    report = to_json(from_json(report))
    env, when = _environment(report), report.get("date") or "unknown"
    verify = (report.get("stages") or {}).get("verify") or {}
    bench = (report.get("stages") or {}).get("benchmark") or {}
    errors = [s.get("max_error") for s in verify.get("shapes") or [] if s.get("max_error") is not None]
    worst = max(errors, default=0.0)
    traces, untimed = [], 0
    for s in verify.get("shapes") or []:
        if s.get("pass") is False:
            err = s.get("max_error")
            finite = err is not None and math.isfinite(err)
            ev = Evaluation(status=EvaluationStatus.INCORRECT_NUMERICAL if finite else EvaluationStatus.RUNTIME_ERROR,
                            environment=env, timestamp=when, log=(s.get("message") or "")[:2000],
                            correctness=Correctness(max_absolute_error=err) if finite else None)
            traces.append(Trace(definition=defn.name, workload=workload_of(defn, s["shape"]), solution=solution,
                                evaluation=ev))
    if any(s.get("pass") is False for s in verify.get("shapes") or []):
        return traces, 0
    for s in bench.get("shapes") or []:
        cand = s.get("candidate") or {}
        latency = _us(cand, "mean")
        if latency is None:
            untimed += 1
            continue
        ref = s.get("default_mean_us") or s.get("default_median_us") or _us(s.get("incumbent"), "mean")
        timing = {"stat": "mean" if cand.get("mean_us") is not None else "median", "mean_ci95_us": cand.get("mean_ci95_us"),
                  "median_us": cand.get("median_us"), "median_ci95_us": cand.get("ci95_us"), "p99_us": cand.get("p99_us"),
                  "calls": cand.get("calls"), "ratio_vs_incumbent": s.get("ratio"), "ratio_ci95": s.get("ratio_ci95")}
        ev = Evaluation(status=EvaluationStatus.PASSED, environment=env, timestamp=when,
                        log="ark.timing " + json.dumps(timing, sort_keys=True),
                        correctness=Correctness(max_absolute_error=worst),
                        performance=Performance(latency_ms=latency / 1000.0,
                                                reference_latency_ms=(ref or 0.0) / 1000.0,
                                                speedup_factor=(ref / latency) if ref else 0.0))
        traces.append(Trace(definition=defn.name, workload=workload_of(defn, s["shape"]), solution=solution,
                            evaluation=ev))
    if not bench.get("shapes") and verify.get("status") == "pass":
        untimed += len(verify.get("shapes") or [])
    return traces, untimed


def _fresh(root: Path) -> TraceSet:
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    return TraceSet(root=root)


def _write(ts: TraceSet, defn: Definition, solutions: list[Solution], cells: list[dict], traces: list[Trace]):
    ts.definitions[defn.name] = defn
    save_json_file(defn, ts.definitions_path / defn.op_type / f"{defn.name}.json")
    for sol in solutions:
        ts.solutions.setdefault(defn.name, []).append(sol)
        save_json_file(sol, ts.solutions_path / defn.op_type / defn.name / f"{sol.name}.json")
    unique = {w.uuid: w for w in (workload_of(defn, c) for c in cells)}
    if unique:
        ts.add_workload_traces([Trace(definition=defn.name, workload=w) for w in unique.values()])
    if traces:
        ts.add_traces(traces)


def export_traceset(payload: dict, out: str | Path) -> dict:
    """payload: {"document": ark.fib-target/1, "candidates": [{"name", "source", "author", "dsl", "status",
    "reports": [report, ...]}]} -> a TraceSet directory at `out` (replaced). Returns counts."""
    doc = payload["document"]
    defn = Definition.model_validate(doc["definition"])
    solutions, traces, untimed = [], [], 0
    for c in payload.get("candidates") or []:
        sol = solution_of(defn, name=c["name"], source=c["source"], author=c.get("author") or "ark",
                          dsl=c.get("dsl") or "triton", description=f"ark candidate, {c.get('status', '')}")
        solutions.append(sol)
        for report in c.get("reports") or []:
            got, skipped = traces_of(defn, sol.name, report)
            traces += got
            untimed += skipped
    ts = _fresh(Path(out))
    _write(ts, defn, solutions, [c["axes"] for c in doc.get("cells") or []], traces)
    return {"path": str(out), "definition": defn.name, "solutions": len(solutions), "traces": len(traces),
            "untimed_shapes": untimed}


def route_for(config: dict, shape: dict) -> dict | None:
    """The route of an ark.serving/1 document that serves `shape`, as gpu_worker.dispatch reads it: a box
    ({"bounds": {axis: [lo, hi]}}) or a range of the one axis ({"lo", "hi"}), half-open, hi null unbounded;
    None: the fallback (the default kernel). Read here rather than through parse_serving_config because
    that parser knows only the built-in targets' axis names (docs/interop.md)."""
    def inside(value, lo, hi):
        return value is not None and lo <= value and (hi is None or value < hi)
    for route in config.get("routes") or []:
        if "bounds" in route:
            if all(inside(shape.get(a), lo, hi) for a, (lo, hi) in route["bounds"].items()):
                return route
        elif inside(shape.get(config.get("axis")), route.get("lo", 0), route.get("hi")):
            return route
    return None


def _kernel_route(config: dict, shape: dict) -> dict | None:
    route = route_for(config, shape)
    return route if route is not None and isinstance(route.get("kernel"), dict) else None


def region_points(doc: dict, config: dict) -> list[dict] | None:
    """Every var-axis point of the operating range that the serving config routes to a kernel (first
    matching route, as ark's dispatcher), or None when the routed boxes hold more than MAX_KEYS points. A
    route bounding an axis the Definition does not have serves nothing, as in route_for."""
    ranges = doc["ranges"]
    boxes = []
    for route in config.get("routes") or []:
        if not isinstance(route.get("kernel"), dict):
            continue
        bounds = route["bounds"] if "bounds" in route else {config.get("axis"): [route.get("lo", 0), route.get("hi")]}
        if set(bounds) - set(ranges):
            continue
        box = {}
        for axis, (lo, hi) in ranges.items():
            b_lo, b_hi = bounds.get(axis, (lo, None))
            box[axis] = (max(lo, b_lo), hi if b_hi is None else min(hi, b_hi - 1))  # route hi is exclusive
        if all(lo <= hi for lo, hi in box.values()):
            boxes.append(box)
    if sum(math.prod(hi - lo + 1 for lo, hi in box.values()) for box in boxes) > MAX_KEYS:
        return None
    points = {tuple(zip(box, values)) for box in boxes
              for values in itertools.product(*(range(lo, hi + 1) for lo, hi in box.values()))}
    return [dict(p) for p in sorted(points) if _kernel_route(config, dict(p)) is not None]


def promotion_traceset(payload: dict, out: str | Path) -> dict:
    """payload: {"document": ark.fib-target/1, "serving_config": ark.serving/1 document, "cells": [axes, ...]
    (default: the document's cells)} -> a TraceSet at `out` for `flashinfer_bench.apply` that serves exactly
    what the serving config routes. apply keys a call by its exact var-axis values, so the TraceSet has one
    Trace, naming the route's Solution, per point of the operating range a route serves (coverage "region"),
    when there are at most MAX_KEYS of them; else only per routed workload cell (coverage "cells": a shape
    between cells then runs the default). Where the default serves there is no Trace: with
    ApplyConfig(on_miss_policy="fallback_only") apply calls the engine's own kernel there. A trace's speedup
    is the evidence's when the route carries one, else 1 (apply compares traces of one key only, and each
    key here has one). `served` counts the workload cells per kernel."""
    doc, config = payload["document"], payload["serving_config"]
    defn = Definition.model_validate(doc["definition"])
    cells = payload.get("cells") or [c["axes"] for c in doc.get("cells") or []]
    solutions: dict[str, Solution] = {}
    version = config.get("version")
    env = Environment(hardware=str(config.get("hardware")), libs={"ark.serving": f"{config.get('target')} v{version}"})

    def solution_for(route: dict) -> str:
        k = route["kernel"]
        source = k.get("source")
        if not isinstance(source, str) or "sha256:" + hashlib.sha256(source.encode()).hexdigest() != k.get("source_hash"):
            raise ValueError(f"route kernel {k.get('candidate_id')}: inline source missing or not matching its hash")
        name = f"ark_{config.get('target')}_{k['candidate_id']}_{k['source_hash'][7:19]}"
        if name not in solutions:
            solutions[name] = solution_of(defn, name=name, source=source, author="ark",
                                          description=f"promoted in serving config v{version}")
        return name

    served = {"default": 0}
    for cell in cells:
        route = _kernel_route(config, cell)
        name = "default" if route is None else solution_for(route)
        served[name] = served.get(name, 0) + 1
    points = region_points(doc, config)
    coverage = "cells" if points is None else "region"
    traces = []
    for shape in (points if points is not None else cells):
        route = _kernel_route(config, shape)
        if route is None:
            continue
        speedup = float(((route.get("evidence") or {}).get("speedup")) or 1.0)
        traces.append(Trace(definition=defn.name, workload=workload_of(defn, shape), solution=solution_for(route),
                            evaluation=Evaluation(
                                status=EvaluationStatus.PASSED, environment=env, timestamp="serving-config",
                                log=f"ark.route serving config v{version}",
                                correctness=Correctness(), performance=Performance(speedup_factor=speedup))))
    ts = _fresh(Path(out))
    _write(ts, defn, list(solutions.values()), cells, traces)
    return {"path": str(out), "definition": defn.name, "served": served, "coverage": coverage, "keys": len(traces)}
