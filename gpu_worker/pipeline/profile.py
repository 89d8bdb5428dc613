"""Where a candidate's time goes: per-kernel GPU times from a short profiled replay (docs/benchmark.md).

After a shape's timed replays, the bench child replays the candidate's captured graph a few more times under
`torch.profiler` (the L2 flushed before each, as in timing). The trace is read as Chrome-trace JSON, the
format torch.profiler writes: only the GPU kernels (and copies/memsets) launched by a graph launch count,
so the flush between replays is left out. They are aggregated per kernel name into time per replay, launches
per replay and share, the few largest named and the rest summed as "other". A value family much slower than
the others is profiled again on its own input (slowest_family). Nothing here is timed for the score: the
events of the timed replays are (pipeline/bench_child.py; docs/benchmark.md, "Where the time goes").
"""

from __future__ import annotations

import json
import os
import tempfile

from ..contract import SLOW_FAMILY_FACTOR
from .stats import family_means

PROFILED_REPLAYS = 3
TOP_KERNELS = 8
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
GRAPH_LAUNCHES = ("cudaGraphLaunch", "cuGraphLaunch")


def aggregate(trace: dict, replays: int, top: int = TOP_KERNELS) -> dict:
    """Per-kernel time per replay from a Chrome trace. Only GPU events correlated with a graph launch count
    when the trace has graph launches; otherwise (an eager call) every GPU event does."""
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    launches = {(e.get("args") or {}).get("correlation") for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and e.get("name") in GRAPH_LAUNCHES}
    launches.discard(None)
    by_name: dict[str, list[float]] = {}
    for e in events:
        if e.get("cat") not in GPU_CATEGORIES:
            continue
        if launches and (e.get("args") or {}).get("correlation") not in launches:
            continue
        by_name.setdefault(e["name"], []).append(float(e.get("dur", 0.0)))
    total = sum(sum(v) for v in by_name.values())
    rows = sorted(({"name": name, "us": sum(d) / replays, "launches": len(d) / replays} for name, d in by_name.items()),
                  key=lambda r: -r["us"])
    for r in rows:
        r["share"] = r["us"] * replays / total if total else None
    head, rest = rows[:top], rows[top:]
    if rest:
        head.append({"name": f"other ({len(rest)} kernels)", "us": sum(r["us"] for r in rest),
                     "launches": sum(r["launches"] for r in rest), "share": sum(r["share"] or 0 for r in rest)})
    return {"replays": replays, "kernel_us": total / replays if replays else None, "kernels": head,
            "graph_only": bool(launches)}


def capture(replay, before=None, replays: int = PROFILED_REPLAYS, workdir=None) -> dict:
    """Profile `replays` calls of `replay` (each after `before`, say an L2 flush) and aggregate them.
    The trace file goes to `workdir` (the child's writable output folder) when given."""
    # local: the profiler loads CUPTI, which only the GPU child needs
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            if before is not None:
                before()
            replay()
        torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json", dir=workdir)
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    finally:
        os.unlink(path)
    return aggregate(trace, replays)


def slowest_family(times: list[float], families: list[str] | None, factor: float = SLOW_FAMILY_FACTOR):
    """The family whose calls were slowest on average, with its mean and the first call index of it, when its
    mean is at least `factor` times the fastest family's; else None. A target's families are its input value
    kinds (ties, ReLU zeros, ...): where a kernel has an input-determined slow path, its time goes elsewhere
    on those, and a profile of another family's input would not show it."""
    means = family_means(times, families)
    if not means or len(means) < 2:
        return None
    slow = max(means, key=means.get)
    if means[slow] < factor * min(means.values()):
        return None
    return {"family": slow, "mean_us": means[slow], "first_set": families.index(slow)}
