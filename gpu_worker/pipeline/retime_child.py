"""The re-timing child (docs/isolation.md, Independent re-timing): times one kernel per shape with
`triton.testing.do_bench_cudagraph` and sends only numbers. Runs in a sandboxed child like every other
candidate run (child.py -> child_run.run, mode "retime"); `which` says whether the kernel timed is the
candidate or the target's default, and a default-timing child never imports any candidate code.

The child reports no verdict: the loop computes one from these numbers (gpu_worker/fib/confirm.py).
Besides each mean it reports how long its timing took on its own clock, so the parent can check that the
child was busy at least that long by the parent's clock (retime_run.py)."""

from __future__ import annotations

from . import tamper

REP_MS = 100  # do_bench_cudagraph's time budget per kernel and shape


def graph_mean_ms(fn, inputs) -> float:
    import triton.testing  # local: only a GPU child times anything

    return triton.testing.do_bench_cudagraph(lambda: fn(*inputs), rep=REP_MS, return_mode="mean")


def retime_in_child(cfg: dict, out, target, forward, seed: int, perf, timer=graph_mean_ms) -> None:
    """One `retimed` message per shape ({"index", "us", "wall_s"}), then tamper findings, if any."""
    fn = forward if cfg.get("which") == "candidate" else target.baseline
    for i, shape in enumerate(cfg["shapes"]):
        inputs = target.make_inputs(shape, seed + i, cfg["device"])
        t0 = perf()
        ms = float(timer(fn, inputs))
        out.send(type="retimed", index=i, us=1000.0 * ms, wall_s=perf() - t0)
    findings = tamper.check()
    if findings:
        out.send(type="tamper", findings=findings)
