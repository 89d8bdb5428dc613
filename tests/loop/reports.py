"""Reports in the `ark.report/1` schema, built the way the GPU pipeline writes them.

No ark.report/1 file is committed yet under bench/results/h200; these follow the schema (stages
guard/verify/benchmark/e2e, benchmark.shapes[], e2e.points[], summary, verdict). The figures
are shaped after REFERENCE.md §3 (dsa_topk on an H200: torch.topk k=2048 M=4 x 32K ~106 us).
`h200_topk_report` assembles one from the real H200 measurements that are committed.
"""

import copy
import json
import math
from pathlib import Path

H200 = {"kind": "h200", "gpu": "NVIDIA H200", "driver": "570.124", "sm_clock_mhz": 1980}


def shape_result(rows, n_ctx, ratio, *, ci=0.01, noise=0.005, incumbent_us=100.0, default_us=None, floor=0.3):
    """One benchmark shape as gpu_worker/pipeline/evaluate.py writes it (ratio = candidate / incumbent time)."""
    default_us = incumbent_us if default_us is None else default_us
    return {
        "shape": {"rows": rows, "n_ctx": n_ctx, "k": 2048, "values": "normal", "lengths": "full"},
        "rounds": 30, "input_sets": 4,
        "candidate": {"median_us": incumbent_us * ratio, "host_us": incumbent_us * ratio + 5, "stale_replays": 0},
        "incumbent": {"median_us": incumbent_us, "host_us": incumbent_us + 5, "stale_replays": 0},
        "incumbent_aa": {"median_us": incumbent_us, "host_us": incumbent_us + 5, "stale_replays": 0},
        "default": {"median_us": default_us, "host_us": default_us + 5, "stale_replays": 0},
        "default_median_us": default_us, "ratio": ratio, "ratio_ci95": [ratio - ci, ratio + ci], "noise_aa": noise,
        "aa_ratio": 1.0, "delta": max(0.02, 2 * noise), "faster": ratio + ci < 1 - max(0.02, 2 * noise),
        "floor_fraction": floor,
    }


def e2e_point(batch, context, ratio=1.0, *, ci=0.01, noise=0.01, verdict="tie"):
    """One e2e grid point as gpu_worker/e2e/gate.py writes it (ratio = candidate / baseline tokens/s)."""
    return {"batch": batch, "context": context, "default_tok_s": 1000.0, "incumbent_tok_s": None,
            "candidate_tok_s": 1000.0 * ratio, "ratio": ratio, "ci95": [ratio - ci, ratio + ci], "noise": noise,
            "parity": {"ok": True}, "kernel_ran": True, "verdict": verdict}


def report(*, candidate_id=1, attempt=1, target="dsa_topk", shapes=None, points=None, guard=None, verify_status="pass",
           verify_shapes=None, benchmark_status="pass", e2e_status="pass", hardware=None, seconds=30.0):
    shapes = [shape_result(4, 32768, 0.8), shape_result(64, 131072, 0.85)] if shapes is None else shapes
    points = [e2e_point(1, 4096), e2e_point(32, 32768)] if points is None else points
    speedups = [1 / s["ratio"] for s in shapes]
    geomean = math.exp(sum(math.log(v) for v in speedups) / len(speedups)) if shapes else None
    lo = math.exp(sum(math.log(1 / s["ratio_ci95"][1]) for s in shapes) / len(shapes)) if shapes else None
    hi = math.exp(sum(math.log(1 / s["ratio_ci95"][0]) for s in shapes) / len(shapes)) if shapes else None
    measured = benchmark_status == "pass"
    return {
        "schema": "ark.report/1", "candidate_id": candidate_id, "attempt": attempt, "target": target,
        "hardware": copy.deepcopy(hardware or H200), "date": "2026-12-02",
        "stages": {
            "guard": {"status": "fail" if guard else "pass", "findings": guard or [], "seconds": 0.1},
            "verify": {"status": verify_status, "findings": [] if verify_status == "pass" else
                       [{"code": "verify:mismatch", "message": "rows 0-3 differ", "line": None}],
                       "shapes": verify_shapes or [{"shape": {"rows": 3, "n_ctx": 4096}, "pass": verify_status == "pass",
                                                    "max_error": 0.0}], "seconds": 5.0},
            "benchmark": {"status": benchmark_status, "findings": [], "shapes": shapes if measured else [],
                          "seconds": seconds},
            "e2e": {"status": e2e_status if measured else "unavailable", "findings": [],
                    "points": points if measured else [], "seconds": 10.0},
        },
        "summary": {"geomean_speedup": geomean if measured else None, "geomean_ci95": [lo, hi] if measured else None,
                    "floor_fraction": max((s["floor_fraction"] for s in shapes), default=None) if measured else None},
        "verdict": {"status": "pass", "reasons": []},
    }


def cpu_report(**kw):
    """What a GPU worker in CPU mode sends for a correct candidate: verified, not timed."""
    return report(benchmark_status="unavailable", hardware={"kind": "cpu", "gpu": None}, seconds=0.0, **kw)


def crossover_report(**kw):
    """A candidate that wins below 64K context and loses above (the crossover case)."""
    shapes = [shape_result(4, 4096, 0.60), shape_result(32, 4096, 0.62), shape_result(4, 32768, 0.75),
              shape_result(32, 32768, 0.78), shape_result(4, 131072, 1.15), shape_result(32, 131072, 1.20),
              shape_result(4, 262144, 1.30)]
    return report(shapes=shapes, **kw)


H200_RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results" / "h200"


def h200_topk_report():
    """A report assembled from real H200 measurements committed under bench/results/h200:
    benchmark shapes from kernels-dev.json (dsa_topk/best against torch.topk, run 2; the ratio
    interval from the p10/p90 of both, the A/A spread from torch.topk's own p10-p90), and the e2e
    stage exactly as e2e_gate.json recorded it. None when those files or records are missing."""
    try:
        records = json.loads((H200_RESULTS / "kernels-dev.json").read_text())
        gate = json.loads((H200_RESULTS / "e2e_gate.json").read_text())
    except (OSError, ValueError):
        return None
    by_shape = {}
    for r in records:
        if r.get("target") == "dsa_topk" and r.get("run") == 2 and r.get("kernel") in ("dsa_topk/best", "torch.topk"):
            by_shape.setdefault(tuple(r["shape"]), {})[r["kernel"]] = r
    shapes = []
    for (rows, n_ctx, k), pair in sorted(by_shape.items(), key=lambda item: (item[0][1], item[0][0])):
        if len(pair) != 2:
            continue
        best, torch_topk = pair["dsa_topk/best"], pair["torch.topk"]
        ratio = best["median_us"] / torch_topk["median_us"]
        noise = (torch_topk["p90_us"] - torch_topk["p10_us"]) / torch_topk["median_us"] / 2
        entry = shape_result(rows, n_ctx, ratio, noise=noise, incumbent_us=torch_topk["median_us"], floor=0.0)
        entry["ratio_ci95"] = [best["p10_us"] / torch_topk["p90_us"], best["p90_us"] / torch_topk["p10_us"]]
        entry["shape"]["k"] = k
        shapes.append(entry)
    if len(shapes) < 3 or not gate.get("points"):
        return None
    built = report(target="dsa_topk", shapes=shapes, points=gate["points"],
                   hardware={"kind": "h200", "gpu": records[0].get("gpu"), "date": records[0].get("date")})
    built["summary"]["floor_fraction"] = None
    built["stages"]["e2e"] = gate
    return built
