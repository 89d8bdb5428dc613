"""Reports as the GPU pipeline writes them (`ark.report/2`), every one built through gpu_worker/contract.py.

For cases the committed H200 reports (tests/loop/test_h200_measurements.py) do not cover. The figures are
shaped after dsa_topk on an H200 (torch.topk, k=2048, 4 rows x 32K: about 106 us). A kernel's synthetic
calls all take the same time, so its mean, median and quartiles are one number.
"""

import copy
import math

from gpu_worker.contract import Report, to_json

H200 = {"kind": "h200", "gpu": "NVIDIA H200", "driver": "570.124", "sm_clock_mhz": 1980}


def _timing(us: float) -> dict:
    return {"mean_us": us, "median_us": us, "q1_us": us, "q3_us": us, "p99_us": us, "min_us": us, "max_us": us,
            "slow_fraction": 0.0, "calls": 64, "host_us": us + 5, "stale_replays": 0}


def shape_result(rows, n_ctx, ratio, *, ci=0.01, noise=0.005, incumbent_us=100.0, default_us=None, floor=0.3):
    """One benchmark shape as gpu_worker/pipeline/evaluate.py writes it (ratio = candidate / incumbent time)."""
    default_us = incumbent_us if default_us is None else default_us
    return {
        "shape": {"rows": rows, "n_ctx": n_ctx, "k": 2048, "values": "normal", "lengths": "full"},
        "rounds": 30, "input_sets": 4,
        "candidate": _timing(incumbent_us * ratio), "incumbent": _timing(incumbent_us),
        "incumbent_aa": _timing(incumbent_us), "default": _timing(default_us),
        "default_median_us": default_us, "default_mean_us": default_us,
        "ratio": ratio, "ratio_ci95": [ratio - ci, ratio + ci], "ratio_of": "mean",
        "aa_ratio": 1.0, "aa_ci95": [1.0 - noise, 1.0 + noise],
        "floor_fraction": floor,
    }


def e2e_point(batch, context, ratio=1.0, *, ci=0.01, noise=0.01):
    """One e2e grid point as gpu_worker/e2e/gate.py writes it (ratio = candidate / baseline tokens/s);
    `noise` is how far its A/A interval reaches from 1."""
    return {"batch": batch, "context": context, "default_tok_s": 1000.0, "incumbent_tok_s": None,
            "candidate_tok_s": 1000.0 * ratio, "ratio": ratio, "ratio_ci95": [ratio - ci, ratio + ci],
            "aa_ratio": 1.0, "aa_ci95": [1.0 - noise, 1.0 + noise], "parity": {"ok": True}, "kernel_ran": True}


def report(*, candidate_id=1, attempt=1, target="dsa_topk", shapes=None, points=None, guard=None, verify_status="pass",
           verify_shapes=None, benchmark_status="pass", e2e_status="pass", hardware=None, seconds=30.0):
    shapes = [shape_result(4, 32768, 0.8), shape_result(64, 131072, 0.85)] if shapes is None else shapes
    points = [e2e_point(1, 4096), e2e_point(32, 32768)] if points is None else points
    speedups = [1 / s["ratio"] for s in shapes]
    geomean = math.exp(sum(math.log(v) for v in speedups) / len(speedups)) if shapes else None
    lo = math.exp(sum(math.log(1 / s["ratio_ci95"][1]) for s in shapes) / len(shapes)) if shapes else None
    hi = math.exp(sum(math.log(1 / s["ratio_ci95"][0]) for s in shapes) / len(shapes)) if shapes else None
    measured = benchmark_status == "pass"
    return to_json(Report.from_dict({
        "schema": "ark.report/2", "candidate_id": candidate_id, "attempt": attempt, "target": target,
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
    }))


def cpu_report(**kw):
    """What a GPU worker in CPU mode sends for a correct candidate: verified, not timed."""
    return report(benchmark_status="unavailable", hardware={"kind": "cpu", "gpu": None}, seconds=0.0, **kw)


def crossover_report(**kw):
    """A candidate that wins below 64K context and loses above (the crossover case)."""
    shapes = [shape_result(4, 4096, 0.60), shape_result(32, 4096, 0.62), shape_result(4, 32768, 0.75),
              shape_result(32, 32768, 0.78), shape_result(4, 131072, 1.15), shape_result(32, 131072, 1.20),
              shape_result(4, 262144, 1.30)]
    return report(shapes=shapes, **kw)

