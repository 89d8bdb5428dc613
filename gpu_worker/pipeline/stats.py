"""Means, tails, bootstrap intervals and rooflines from the child's raw event times (docs/benchmark.md)."""

from __future__ import annotations

import math

import numpy as np

BOOTSTRAP_RESAMPLES = 2000

# Measured ceilings per hardware kind (docs/kernels.md): device copy rate and dense bf16 rate.
CEILINGS = {
    "h200": {"bytes_per_s": 4.25e12, "bf16_flops_per_s": 700e12, "l2_bytes": 60e6},
}


def ceilings_for(kind: str | None) -> dict | None:
    return CEILINGS.get((kind or "").lower())


SLOW_FACTOR = 3.0  # a call slower than this many times the median is a slow call


def kernel_stats(times: list[float], seed: int = 0) -> dict:
    """One kernel's distribution over its timed calls (one call per input set): the mean with its
    bootstrap 95% interval, the quartiles, the tail and the share of slow calls."""
    x = np.asarray(times, float)
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(BOOTSTRAP_RESAMPLES, len(x)))].mean(axis=1)
    median = float(np.median(x))
    q1, q3, p99 = np.percentile(x, [25, 75, 99])
    return {"mean_us": float(x.mean()),
            "mean_ci95_us": [float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))],
            "median_us": median, "ci95_us": median_ci(times, seed), "q1_us": float(q1), "q3_us": float(q3),
            "p99_us": float(p99), "min_us": float(x.min()), "max_us": float(x.max()),
            "slow_fraction": float((x > SLOW_FACTOR * median).mean()), "calls": len(x)}


def _means_by(times: list[float], keys: list) -> dict:
    """Mean time per key, call j under keys[j], in the keys' order of first appearance."""
    by: dict = {}
    for t, key in zip(times, keys):
        by.setdefault(key, []).append(t)
    return {key: float(np.mean(v)) for key, v in by.items()}


def family_means(times: list[float], families: list[str] | None) -> dict | None:
    """Mean time per input-value family (call j was timed on a set of family families[j])."""
    return _means_by(times, families) if families else None


def place_means(times: list[float], places: list[int] | None) -> list[float] | None:
    """Mean time by place in the order of the kernels within an input set (0: first). Every kernel takes every
    place about equally often; a place much slower than the others is the harness's bias, not a kernel's."""
    if not places or len(places) != len(times):
        return None
    by = _means_by(times, places)
    return [by[q] for q in sorted(by)]


def paired_mean_ratio(a: list[float], b: list[float], seed: int = 0) -> dict:
    """mean(a) / mean(b) over calls paired by input set, with a paired bootstrap 95% interval; and the same
    for the 99th percentiles (the tail ratio)."""
    x, y = np.asarray(a, float), np.asarray(b, float)
    n = min(len(x), len(y))
    x, y = x[:n], y[:n]
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(BOOTSTRAP_RESAMPLES, n))
    samples = x[idx].mean(axis=1) / y[idx].mean(axis=1)
    tails = np.percentile(x[idx], 99, axis=1) / np.percentile(y[idx], 99, axis=1)
    return {"ratio": float(x.mean() / y.mean()),
            "ci95": [float(np.percentile(samples, 2.5)), float(np.percentile(samples, 97.5))],
            "tail_ratio": float(np.percentile(x, 99) / np.percentile(y, 99)),
            "tail_ci95": [float(np.percentile(tails, 2.5)), float(np.percentile(tails, 97.5))],
            "samples": samples}


def median_ci(times: list[float], seed: int = 0) -> list[float]:
    """Bootstrap 95% interval of the median of one kernel's times."""
    x = np.asarray(times, float)
    rng = np.random.default_rng(seed)
    meds = np.median(x[rng.integers(0, len(x), size=(BOOTSTRAP_RESAMPLES, len(x)))], axis=1)
    return [float(np.percentile(meds, 2.5)), float(np.percentile(meds, 97.5))]


def roofline(shape_bytes: int, shape_flops: int, median_us: float, ceil: dict | None) -> dict:
    out = {"gb_per_s": shape_bytes / (median_us * 1e-6) / 1e9 if median_us > 0 else None,
           "tflop_per_s": (shape_flops / (median_us * 1e-6) / 1e12) if shape_flops and median_us > 0 else None,
           "floor_us": None, "floor_fraction": None, "bound": None, "bytes_fraction": None, "flops_fraction": None}
    if ceil:
        t_bytes = shape_bytes / ceil["bytes_per_s"]
        t_flops = shape_flops / ceil["bf16_flops_per_s"] if shape_flops else 0.0
        floor = max(t_bytes, t_flops) * 1e6
        out.update(floor_us=floor, floor_fraction=floor / median_us if median_us > 0 else None,
                   bound="compute" if t_flops > t_bytes else "memory")
        if median_us > 0:  # achieved rates against the ceilings: which of the two the kernel is short of
            out.update(bytes_fraction=t_bytes * 1e6 / median_us, flops_fraction=t_flops * 1e6 / median_us)
    return out


def geomean(values) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summarize_shapes(ratio_samples: list[np.ndarray], ratios: list[float], floor_fractions: list) -> dict:
    """Geomean speedup (incumbent / candidate, of means) over shapes; its CI from the per-shape bootstrap
    samples."""
    if not ratios:
        return {"geomean_speedup": None, "geomean_ci95": None, "floor_fraction": None}
    logs = np.mean([np.log(s) for s in ratio_samples], axis=0)
    speedup = 1.0 / geomean(ratios)
    lo, hi = np.percentile(np.exp(-logs), [2.5, 97.5])
    return {"geomean_speedup": speedup, "geomean_ci95": [float(lo), float(hi)],
            "floor_fraction": geomean([f for f in floor_fractions if f])}


def host_gap(host_us: float, event_us: float) -> bool:
    """Whether a replay took far longer on the host's clock than its own events say: GPU work the events
    do not bracket (docs/benchmark.md, "Traps")."""
    return host_us > 3 * event_us + 50
