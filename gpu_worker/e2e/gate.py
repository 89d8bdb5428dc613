"""The e2e gate: does the candidate's kernel, served through dispatch, make the decode step faster?

Per grid point (batch, context) the decode step is captured once per kernel (default, the
incumbent if any, the candidate) as ONE CUDA graph each, over the same weights and caches.
Graph replays are timed with CUDA events in interleaved rounds (default, default again for the
A/A noise, incumbent, candidate; the order rotates each round), host wall time is taken around
the same replays as a cross-check, and the candidate's tokens/s ratio to its baseline gets a
bootstrap 95% interval over rounds. Parity compares the candidate's outputs with the default's;
a profiler trace of one candidate replay must show the candidate's own Triton kernel.
Beside them each point times the ceiling: the same step with the slot's kernel replaced by a fixed,
precomputed answer (e2e/ceiling.py), so a candidate's gain reads as "attained x of a possible y".

Given a route set (a candidate's proposed boxes, or a serving config's routes), the candidate side serves
that route set instead of the candidate everywhere: each call goes to the route whose bounds hold its
(rows = batch, n_ctx = context), the default outside every route, and each point and the stage report the
calls per route (`route_hits`, docs/keep-rule.md, Winning regions).
"""

import datetime
import os
import sys
import time

import numpy as np
import torch

from gpu_worker.dispatch import (
    CandidateLoadError,
    Dispatcher,
    ServingConfigError,
    parse_serving_config,
    routed_config,
    single_kernel_config,
)
from gpu_worker.e2e.ceiling import ceiling_summary, fixed_answer_for
from gpu_worker.e2e.harness import CPU_PROFILE, PROFILES, HarnessConfig, normalize_grid
from gpu_worker.e2e.model import SLOTS, DecodeModel, load_preset
from gpu_worker.e2e.parity import compare_indexer_steps, compare_steps

E2E_TARGETS = set(SLOTS)
# PARAMS keys a candidate could use to steer the harness; they are findings, never settings
_GRAPH_KEYS = {"graphs", "cuda_graphs", "use_cuda_graphs", "cudagraphs", "eager", "enforce_eager"}
_HARNESS_KEYS = {
    "batch",
    "batches",
    "max_batch",
    "context",
    "contexts",
    "n_ctx",
    "max_context",
    "grid",
    "rounds",
    "seed",
    "hidden_rtol",
}


def _finding(code: str, message: str, **extra) -> dict:
    return {"code": code, "message": message, **extra}


def run_gate(
    *, target: str, candidate_source: str, incumbent_source: str | None, profile: str, grid=None, routes=None,
    largest_first: bool = False, on_point=None,
) -> dict:
    """The e2e stage of a report (see module docstring); never raises for a bad candidate. `routes`: the
    route set the candidate side serves (dispatcher.routed_config); None serves the candidate everywhere.
    A bench run on a lease may take the largest point first and see each point as it ends (`on_point(result)`),
    so that a run cut short keeps what it measured; the grid and its verdicts are the same either way."""
    if target not in E2E_TARGETS:
        return {
            "status": "skipped",
            "reason": f"target {target!r} has no slot in the e2e workload (only {sorted(E2E_TARGETS)})",
            "findings": [],
        }
    if profile not in PROFILES:
        return {"status": "error", "reason": f"unknown e2e profile {profile!r}", "findings": []}
    requested = PROFILES[profile]
    gpu = torch.cuda.is_available()
    cfg = requested if (gpu and requested.graphs) else PROFILES[CPU_PROFILE[target]]
    result = {
        "status": None,
        "mode": "cuda-graphs" if cfg.graphs else "cpu-eager",
        "profile": cfg.profile,
        "grid_hash": "sha256:" + cfg.sha256(),
        "harness": cfg.as_dict(),
        "points": [],
        "findings": [],
        "device": torch.cuda.get_device_name() if gpu else "cpu",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "routes": routes,
    }
    findings = result["findings"]
    if grid is not None and normalize_grid(grid) != sorted(requested.grid):
        findings.append(
            _finding(
                "e2e:harness_changed",
                f"grid {normalize_grid(grid)} differs from profile "
                f"{profile!r}'s {sorted(requested.grid)}; the grid belongs to the harness",
            )
        )
        result["status"] = "fail"
        return result
    hash_before = cfg.sha256()

    if not cfg.graphs:
        problem = _interpreter_problem()
        if problem:
            result.update(status="error", reason=problem)
            return result
    hardware = profile
    try:
        config = _candidate_config(target, hardware, candidate_source, routes)
    except (ServingConfigError, ValueError) as exc:  # the route set is the loop's, not the candidate's
        result.update(status="error", reason=f"the route set to serve is not a serving config: {exc}")
        return result
    try:
        cand = Dispatcher(target)
        cand.load(config)
    except (ServingConfigError, CandidateLoadError) as exc:
        findings.append(_finding("e2e:load_failed", str(exc)))
        result["status"] = "fail"
        return result
    dispatchers = {"default": Dispatcher(target)}
    if incumbent_source is not None:
        try:
            dispatchers["incumbent"] = Dispatcher(target)
            dispatchers["incumbent"].load(
                single_kernel_config(
                    target=target, hardware=hardware, candidate_id="incumbent", source=incumbent_source
                )
            )
        except (ServingConfigError, CandidateLoadError) as exc:
            result.update(status="error", reason=f"incumbent does not load: {exc}")
            return result
    dispatchers["candidate"] = cand
    module_params = set(_params_of(cand))
    if module_params & _GRAPH_KEYS:
        findings.append(
            _finding(
                "e2e:graphs_off",
                f"candidate PARAMS name graph settings "
                f"{sorted(module_params & _GRAPH_KEYS)}; graph mode belongs to the harness",
            )
        )
    if module_params & _HARNESS_KEYS:
        findings.append(
            _finding(
                "e2e:harness_changed",
                f"candidate PARAMS name harness settings {sorted(module_params & _HARNESS_KEYS)}",
            )
        )
    if findings:
        result["status"] = "fail"
        return result

    preset = load_preset(cfg.preset)
    result["model"] = f"{preset['model']}:{preset['name']}"
    runner = _run_point_graphs if cfg.graphs else _run_point_eager
    points = sorted(cfg.grid, key=lambda p: p[0] * p[1], reverse=True) if largest_first else cfg.grid
    for batch, context in points:
        cand.route_hits = {}
        try:
            point = runner(cfg, preset, batch, context, dispatchers, findings)
        except Exception as exc:  # noqa: BLE001 -- a fault at one point is reported, the others still run
            findings.append(
                _finding("e2e:point_error", f"{type(exc).__name__}: {exc}", batch=batch, context=context)
            )
            point = {"batch": batch, "context": context, "error": f"{type(exc).__name__}: {exc}"}
        _count_routes(point, cand, preset["layers"], routed=routes is not None, eager=not cfg.graphs)
        result["points"].append(point)
        if on_point is not None:
            on_point(result)
        if gpu:
            torch.cuda.empty_cache()

    if cfg.sha256() != hash_before:
        findings.append(_finding("e2e:harness_changed", "the harness config changed during the run"))
    result["route_hits"] = _total_hits(result["points"])
    result["status"] = _status(result, cfg)
    return result


def _candidate_config(target: str, hardware: str, source: str, routes) -> dict:
    """The config the candidate side serves: the candidate everywhere, or the route set given, which must
    be a valid serving config and send at least one route to the candidate."""
    if routes is None:
        return single_kernel_config(target=target, hardware=hardware, candidate_id="candidate", source=source)
    config = routed_config(target=target, hardware=hardware, candidate_id="candidate", source=source, routes=routes)
    table = parse_serving_config(config, target=target)
    if not any(r.kernel is not None and r.kernel.candidate_id == "candidate" for r in table.routes):
        raise ValueError("no route serves the candidate: there is nothing of it to run end to end")
    return config


def _count_routes(point: dict, dispatcher: Dispatcher, layers: int, *, routed: bool, eager: bool) -> None:
    """The point's calls per route in one decode step. Every step of a point has the same shape and so
    the same routes: the counts over the steps taken (warm-up and capture included) divide by them.
    Under a route set, the eager check that the candidate ran becomes: every layer's call went through
    the route set's dispatcher (the default serves the shapes outside its routes)."""
    total = sum(dispatcher.route_hits.values())
    steps = total // layers if layers else 0
    if steps == 0 or total != steps * layers:
        point["route_hits"] = None  # the step failed before its calls, or some bypassed dispatch
        return
    point["route_hits"] = [{**row, "calls": row["calls"] // steps} for row in dispatcher.hit_table()]
    if routed and eager and "error" not in point:
        point["kernel_ran"] = True
        point["kernel_evidence"] = "dispatch route hits (cpu-eager): every layer's call through the route set"


def _total_hits(points: list) -> list | None:
    """Calls per route over the grid: one decode step at each point."""
    rows = [p["route_hits"] for p in points if p.get("route_hits")]
    if not rows:
        return None
    total = [dict(row) for row in rows[0]]
    for other in rows[1:]:
        for row, add in zip(total, other):
            row["calls"] += add["calls"]
    return total


def _interpreter_problem() -> str | None:
    """On CPU, Triton must run in its interpreter, which it decides when triton.language is imported."""
    if "triton" not in sys.modules:
        os.environ["TRITON_INTERPRET"] = "1"
        return None
    # local: importing triton.language fixes interpreter mode for the process, so only once it is loaded
    from triton.language import standard

    if type(standard.cumsum).__name__ != "InterpretedFunction":
        return (
            "cpu-eager needs TRITON_INTERPRET=1 set before triton is imported "
            "(triton was imported without it in this process)"
        )
    return None


def _params_of(dispatcher: Dispatcher) -> dict:
    """The candidate module's PARAMS (a route set may route other kernels too: only its own count)."""
    forward = next(k for k in dispatcher.kernels if k.name == "candidate").forward
    return dict(forward.__globals__.get("PARAMS", {}) or {})


def _status(result: dict, cfg: HarnessConfig) -> str:
    codes = {f["code"] for f in result["findings"]}
    if "e2e:point_error" in codes and all("error" in p for p in result["points"]):
        return "error"
    failing = codes - {"e2e:timing_note"}
    points = result["points"]
    if failing or any(not p.get("parity", {}).get("ok") or not p.get("kernel_ran") for p in points):
        return "fail"
    if not cfg.graphs:
        return "unavailable"  # plumbing checked, no timings on this host
    return "pass"  # timed: whether a point is slower beyond noise is the loop's decision (loop.policy)


def _snapshot(out, model: DecodeModel) -> dict:
    if model.slot == "dsa_topk":
        return {"hidden": out.hidden.clone(), "indices": model.indices.clone(), "logits": model.logits.clone()}
    return {"hidden": out.hidden.clone(), "indices": model.indices.clone(), "slot_out": model.slot_out.clone(),
            "q": model.slot_q.clone(), "w": model.slot_w.clone()}


def _compare(default: dict, other: dict, model: DecodeModel, cfg) -> dict:
    """One step's outputs against the default's, by the slot's rule (e2e/parity.py)."""
    if model.slot == "dsa_topk":
        return compare_steps(default, other, model.lengths, model.topk_k, cfg.hidden_rtol)
    return compare_indexer_steps(default, other, model, cfg.hidden_rtol)


def _parity(outs: dict, model, cfg) -> dict:
    """The candidate's step against the default's, and whether the incumbent's agreed too."""
    parity = _compare(outs["default"], outs["candidate"], model, cfg)
    if "incumbent" in outs:
        parity["incumbent_ok"] = _compare(outs["default"], outs["incumbent"], model, cfg)["ok"]
    return parity


def _run_point_eager(cfg, preset, batch, context, dispatchers, findings) -> dict:
    model = DecodeModel(preset, batch=batch, context=context, device="cpu", seed=cfg.seed,
                        slot=dispatchers["default"].target)
    outs = {}
    for name, d in dispatchers.items():
        d.calls.clear()
        outs[name] = _snapshot(model.step(d), model)
    parity = _parity(outs, model, cfg)
    fixed = fixed_answer_for(dispatchers["default"].target, outs["default"])
    ceiling = _compare(outs["default"], _snapshot(model.step(fixed), model), model, cfg)
    ran = dispatchers["candidate"].calls.get("candidate", 0) == preset["layers"]
    return {
        "batch": batch,
        "context": context,
        "default_tok_s": None,
        "incumbent_tok_s": None,
        "candidate_tok_s": None,
        "ceiling_tok_s": None,
        "ratio": None,
        "ratio_ci95": None,
        "aa_ci95": None,
        "parity": parity,
        "ceiling_parity": ceiling,
        "kernel_ran": ran,
        "kernel_evidence": "dispatch call count (cpu-eager)",
        "timings": "unavailable: cpu-eager runs the tiny preset to check plumbing only",
    }


def capture_step(model: DecodeModel, topk):
    """Warm up on a side stream (compiles Triton kernels), then capture one decode step as a CUDA graph."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            model.step(topk)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = model.step(topk)
    torch.cuda.synchronize()
    return graph, out


def time_interleaved(runs: dict, rounds: int, round_ms: float) -> dict:
    """runs: name -> zero-arg callable doing one step. Returns name -> {"ms": [...], "wall_ms": [...]} per step."""
    names = list(runs)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(3):
        runs[names[0]]()
    end.record()
    end.synchronize()
    est = start.elapsed_time(end) / 3
    n = int(max(3, min(500, round(round_ms / max(est, 1e-3)))))
    for fn in runs.values():  # warm each once more after the estimate
        fn()
    torch.cuda.synchronize()
    times = {name: {"ms": [], "wall_ms": [], "replays_per_round": n} for name in names}
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            fn = runs[name]
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            start.record()
            for _ in range(n):
                fn()
            end.record()
            end.synchronize()
            wall = (time.perf_counter() - t0) * 1e3
            times[name]["ms"].append(start.elapsed_time(end) / n)
            times[name]["wall_ms"].append(wall / n)
    return times


def bootstrap_ratio(base_ms, cand_ms, resamples: int, seed: int = 0):
    """tokens/s ratio candidate/base = median(base)/median(cand), 95% bootstrap over paired rounds."""
    base, cand = np.asarray(base_ms), np.asarray(cand_ms)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(base), size=(resamples, len(base)))
    ratios = np.median(base[idx], axis=1) / np.median(cand[idx], axis=1)
    return float(np.median(base) / np.median(cand)), [
        float(np.percentile(ratios, 2.5)),
        float(np.percentile(ratios, 97.5)),
    ]


def profiled_kernel_names(graph) -> set[str]:
    # local: the profiler loads CUPTI; a CPU-mode worker never gets here
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        graph.replay()
        torch.cuda.synchronize()
    return {e.name for e in prof.events()}


def _run_point_graphs(cfg, preset, batch, context, dispatchers, findings) -> dict:
    model = DecodeModel(preset, batch=batch, context=context, device="cuda", seed=cfg.seed,
                        slot=dispatchers["default"].target)
    graphs, outs = {}, {}
    point = {"batch": batch, "context": context}
    for name, d in dispatchers.items():
        try:
            graph, out = capture_step(model, d)
        except Exception as exc:  # whatever breaks capture is the finding
            if name == "default":
                raise
            findings.append(
                _finding(
                    "e2e:capture_failed", f"{name}: {type(exc).__name__}: {exc}", batch=batch, context=context
                )
            )
            torch.cuda.synchronize()
            return {**point, "error": f"capture failed: {exc}", "kernel_ran": False, "parity": {"ok": False}}
        graphs[name] = graph
        graph.replay()
        torch.cuda.synchronize()
        outs[name] = _snapshot(out, model)
    parity = _parity(outs, model, cfg)
    # the ceiling: the default's own answer, computed above outside any timing, served at zero cost
    fixed = fixed_answer_for(dispatchers["default"].target, outs["default"])
    graphs["ceiling"], out = capture_step(model, fixed)
    graphs["ceiling"].replay()
    torch.cuda.synchronize()
    ceiling = _compare(outs["default"], _snapshot(out, model), model, cfg)
    del outs, out

    # profiler evidence: the candidate's own Triton kernel inside its graph, absent from the default's
    served = dispatchers["candidate"].kernel_for_shape({"rows": batch, "n_ctx": context})
    to_default = served is dispatchers["candidate"].default  # a route set may leave this point to the default
    cand_names = set(served.triton_names)
    seen_cand = profiled_kernel_names(graphs["candidate"])
    seen_default = profiled_kernel_names(graphs["default"])
    evidence = sorted(
        n for n in cand_names if any(n in s for s in seen_cand) and not any(n in s for s in seen_default)
    )
    if not evidence and not to_default:
        findings.append(
            _finding(
                "e2e:kernel_not_seen",
                "no kernel of the candidate's in the profiler trace of its "
                f"graph replay (looked for {sorted(cand_names)})",
                batch=batch,
                context=context,
            )
        )

    runs = {"default": graphs["default"].replay, "default_aa": graphs["default"].replay}
    if "incumbent" in graphs:
        runs["incumbent"] = graphs["incumbent"].replay
    runs["candidate"] = graphs["candidate"].replay
    runs["ceiling"] = graphs["ceiling"].replay
    times = time_interleaved(runs, cfg.rounds, cfg.round_ms)
    base = "incumbent" if "incumbent" in graphs else "default"
    aa_ratio, aa_ci = bootstrap_ratio(
        times["default"]["ms"], times["default_aa"]["ms"], cfg.bootstrap, cfg.seed
    )
    ratio, ci = bootstrap_ratio(times[base]["ms"], times["candidate"]["ms"], cfg.bootstrap, cfg.seed + 1)
    _, ceiling_ci = bootstrap_ratio(times["default"]["ms"], times["ceiling"]["ms"], cfg.bootstrap, cfg.seed + 2)

    def tok_s(name, key="ms"):
        return batch / (float(np.median(times[name][key])) / 1e3) if name in times else None

    wall_vs_events = {
        name: float(np.median(times[name]["wall_ms"]) / np.median(times[name]["ms"])) for name in times
    }
    if any(v < 0.95 for v in wall_vs_events.values()):
        findings.append(
            _finding(
                "e2e:timing_mismatch",
                f"host wall time below event time: {wall_vs_events}",
                batch=batch,
                context=context,
            )
        )
    point.update(
        {
            "default_tok_s": tok_s("default"),
            "incumbent_tok_s": tok_s("incumbent"),
            "candidate_tok_s": tok_s("candidate"),
            "ceiling_tok_s": tok_s("ceiling"),
            **ceiling_summary(tok_s("default"), tok_s("candidate"), tok_s("ceiling")),
            "ceiling_ratio_ci95": ceiling_ci,
            "ceiling_parity": ceiling,
            "ratio": ratio,
            "ratio_ci95": ci,
            "baseline": base,
            "aa_ratio": aa_ratio,
            "aa_ci95": aa_ci,
            "parity": parity,
            "kernel_ran": bool(evidence) or to_default,
            "kernel_evidence": evidence or ("routed to the default here: no candidate kernel to see" if to_default else []),
            "step_ms": {name: float(np.median(t["ms"])) for name, t in times.items()},
            "wall_tok_s": {name: tok_s(name, "wall_ms") for name in times},
            "wall_over_events": wall_vs_events,
            "replays_per_round": times["default"]["replays_per_round"],
            "rounds": cfg.rounds,
            "round_step_ms": {name: [round(v, 5) for v in t["ms"]] for name, t in times.items()},
        }
    )
    del graphs, model
    return point
