"""The independent timer of docs/interop.md: `python -m gpu_worker.fib retime` re-times a kept candidate and
the target's default kernel in a fresh process with `triton.testing.do_bench_cudagraph`, and for an imported
target records FlashInfer-Bench's own timer beside it. On a CPU host there is nothing to time."""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path

import torch

from ..targets import get_target
from .confirm import NOT_ON_CPU


def _load(source: str):
    path = Path(tempfile.mkdtemp(prefix="ark-retime-")) / "candidate.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("ark_retimed", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["ark_retimed"] = module
    spec.loader.exec_module(module)
    return module


def graph_time_ms(fn, inputs) -> float:
    """The confirming timer: CUDA-graph replay, as ark's benchmark times (no launch overhead in the time)."""
    import triton.testing  # local: only a GPU host times anything

    return triton.testing.do_bench_cudagraph(lambda: fn(*inputs), rep=100, return_mode="mean")


def fib_time_ms(fn, inputs) -> float:
    """FlashInfer-Bench's timer: eager launches, inputs cloned and the L2 flushed before every call. Recorded,
    not judged: for microsecond kernels it times the launch (bench/results/h200/2026-12-04-fib)."""
    from flashinfer_bench.bench.timing import do_bench  # local: only imported targets need the package

    clones = lambda: [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
    return do_bench(lambda args: fn(*args), warmup=10, rep=100, setup=clones, return_mode="mean")


def retime(spec: dict) -> dict:
    """spec: {"target", "target_document"?, "source", "shapes"?, "seed"?} -> per shape the candidate's and
    the default's mean time in microseconds, or {"status": "unavailable"} on a CPU host."""
    target = get_target(spec["target"], spec.get("target_document"))
    if not torch.cuda.is_available():
        return {"status": "unavailable", "reason": NOT_ON_CPU, "timer": None, "shapes": []}
    forward = _load(spec["source"]).forward
    fib_shaped = spec.get("target_document") is not None
    rows = []
    for i, shape in enumerate(spec.get("shapes") or target.benchmark_shapes("full")):
        inputs = target.make_inputs(shape, int(spec.get("seed") or 0) + i, "cuda")
        row = {"shape": shape, "candidate_us": 1000.0 * graph_time_ms(forward, inputs),
               "default_us": 1000.0 * graph_time_ms(target.baseline, inputs)}
        if fib_shaped:
            row["fib_candidate_us"] = 1000.0 * fib_time_ms(forward, inputs)
            row["fib_default_us"] = 1000.0 * fib_time_ms(target.baseline, inputs)
        rows.append(row)
    return {"status": "measured", "timer": "triton.do_bench_cudagraph", "device": torch.cuda.get_device_name(),
            "shapes": rows}
