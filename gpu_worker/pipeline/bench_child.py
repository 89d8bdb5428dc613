"""Timing inside the child, GPU only (REFERENCE.md §4): each kernel's call captured in a CUDA graph
per input set, replays timed with CUDA events, L2 flushed before every timed replay, input sets
rotated, kernels interleaved round-robin, outputs poisoned before and fingerprinted after each
replay, and checked against the target's reference once timing is over. The parent turns the raw
times into medians and confidence intervals (pipeline/stats.py)."""

from __future__ import annotations

import contextlib
import traceback

import torch

from ..targets.base import as_outputs
from .protocol import derive_seed

L2_FLUSH_BYTES = 256 << 20  # > 60 MB of H200 L2
ROTATE_BYTES = 256 << 20  # input sets per shape: enough that their total exceeds L2 several times
MAX_SETS = 8
HOST_REPLAYS = 10
DEVICE = "cuda"  # tests swap in "cpu" together with a fake capture


def _rounds(profile: str) -> int:
    return 20 if profile == "smoke" else 50


def _input_bytes(inputs) -> int:
    return sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))


def _fingerprint(outputs, slot: torch.Tensor) -> None:
    """Order-independent integer fingerprint (sum and sum of squares of the bit patterns)."""
    acc = torch.zeros(2, dtype=torch.int64, device=slot.device)
    for t in outputs:
        bits = t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])
        b = bits.to(torch.int64)
        acc[0] += b.sum()
        acc[1] += (b * b).sum()
    slot.copy_(acc)


def _poison(outputs) -> None:
    for t in outputs:
        if t.is_floating_point():
            t.fill_(float("nan"))
        else:
            t.fill_(0x7F if t.element_size() == 1 else 0x7F7F7F7F if t.element_size() >= 4 else 0x7F7F)


def _sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def _event():
    return torch.cuda.Event(enable_timing=True)


def _capture(fn, inputs):
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            fn(*inputs)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outputs = as_outputs(fn(*inputs))
    torch.cuda.synchronize()
    return graph, outputs


def warm_up(target, shapes, candidate, incumbent, default) -> None:
    """One call of each kernel per benchmark shape, before the secret arrives: imports, CUDA init and
    Triton compiles then overlap the verify stage (evaluate.py starts this child early). The inputs come
    from a fixed public seed, the same in every evaluation: that is harmless because nothing timed or
    checked depends on them. Failures are ignored: the benchmark proper reports its own."""
    kernels = [candidate, incumbent] + ([default] if incumbent is not default else [])
    for i, shape in enumerate(shapes):
        with contextlib.suppress(Exception):  # a device fault, say: the benchmark meets it again and reports it
            inputs = target.make_inputs(shape, derive_seed(0, "warmup", i, 0), DEVICE)
            for fn in kernels:
                with contextlib.suppress(Exception):
                    fn(*inputs)
            _sync()
            del inputs
            if DEVICE == "cuda":
                torch.cuda.empty_cache()


def benchmark(cfg, out, target, candidate, incumbent, default, seed: int, perf) -> None:
    kernels = [("candidate", candidate), ("incumbent", incumbent), ("incumbent_aa", incumbent)]
    if incumbent is not default:
        kernels.append(("default", default))
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device=DEVICE)
    rounds = _rounds(cfg["profile"])
    for i, shape in enumerate(cfg["shapes"]):
        t0 = perf()
        msg = {"type": "bench_shape", "index": i, "shape": shape, "findings": [], "kernels": {}}
        try:
            first = target.make_inputs(shape, derive_seed(seed, "bench", i, 0), DEVICE)
            n_sets = max(2, min(MAX_SETS, -(-ROTATE_BYTES // max(1, _input_bytes(first)))))
            sets = [first] + [target.make_inputs(shape, derive_seed(seed, "bench", i, j), DEVICE)
                              for j in range(1, n_sets)]
            graphs = {}
            for name, fn in kernels:
                try:
                    graphs[name] = [_capture(fn, inputs) for inputs in sets]
                except Exception:
                    code = "bench:graph_capture" if name == "candidate" else "bench:harness_error"
                    msg["findings"].append({"code": code, "message": f"{name}: CUDA graph capture failed: "
                                            + traceback.format_exc()[-2000:]})
                    _sync()
                    break
            if msg["findings"]:
                msg["seconds"] = perf() - t0
                out.send(**msg)
                continue
            expected = {}
            for name, _ in kernels:
                expected[name] = []
                for graph, outputs in graphs[name]:
                    _poison(outputs)
                    graph.replay()
                    slot = torch.zeros(2, dtype=torch.int64, device=DEVICE)
                    _fingerprint(outputs, slot)
                    expected[name].append(slot)
            names = [n for n, _ in kernels]
            starts = {n: [_event() for _ in range(rounds)] for n in names}
            ends = {n: [_event() for _ in range(rounds)] for n in names}
            prints = {n: torch.zeros(rounds, 2, dtype=torch.int64, device=DEVICE) for n in names}
            _sync()
            wall0 = perf()
            for r in range(rounds):
                j = r % n_sets
                for q in range(len(names)):
                    name = names[(q + r) % len(names)]  # rotate who goes first in each round
                    graph, outputs = graphs[name][j]
                    _poison(outputs)
                    flush.zero_()
                    starts[name][r].record()
                    graph.replay()
                    ends[name][r].record()
                    _fingerprint(outputs, prints[name][r])
            _sync()
            wall_s = perf() - wall0
            for name in names:
                times = [s.elapsed_time(e) * 1000.0 for s, e in zip(starts[name], ends[name])]
                want = torch.stack([expected[name][r % n_sets] for r in range(rounds)])
                stale = int((prints[name] != want).any(1).sum())
                host = []
                for _ in range(HOST_REPLAYS):  # median of single synchronised replays: robust to a preemption
                    _sync()
                    h0 = perf()
                    graphs[name][0][0].replay()
                    _sync()
                    host.append((perf() - h0) * 1e6)
                host_us = sorted(host)[len(host) // 2]
                ok, err, message = True, 0.0, ""
                if name == "candidate" or stale:
                    for j, inputs in enumerate(sets):
                        graph, outputs = graphs[name][j]
                        ref = target.reference(inputs)
                        ok, err, message = target.check(outputs[0] if len(outputs) == 1 else tuple(outputs),
                                                        inputs, ref)
                        del ref
                        if not ok:
                            break
                msg["kernels"][name] = {"times_us": times, "host_us": host_us, "stale_replays": stale,
                                        "check": {"pass": ok, "max_error": err, "message": message}}
                if name == "candidate" and stale:
                    msg["findings"].append({"code": "bench:stale_output", "message":
                                            f"{stale} of {rounds} timed replays left outputs that differ from "
                                            "the same graph's untimed replay"})
                if name == "candidate" and not ok:
                    msg["findings"].append({"code": "bench:wrong_output",
                                            "message": f"graph replay output fails the check: {message}"})
            msg.update(rounds=rounds, input_sets=n_sets, timed_wall_s=wall_s)
            del graphs, sets, first
            if DEVICE == "cuda":
                torch.cuda.empty_cache()
        except torch.OutOfMemoryError as e:
            msg["findings"].append({"code": "bench:oom", "message": str(e)[:2000]})
        except Exception:
            msg["findings"].append({"code": "bench:exception", "message": traceback.format_exc()[-3000:]})
        msg["seconds"] = perf() - t0
        out.send(**msg)
