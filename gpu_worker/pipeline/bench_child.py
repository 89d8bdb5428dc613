"""Timing inside the child, GPU only (docs/benchmark.md).

Each kernel's call is captured once per shape in a CUDA graph, on its own input buffers. Then, for each of
many input sets drawn AFTER capture from the secret seed (rotating over the target's value families), the
set is copied into every kernel's captured buffers, the outputs are poisoned, L2 is flushed (and persisting
L2 lines reset), the GPU is held by a spin of the harness's own, and one replay is timed with a pair of CUDA
events: one call per event pair, kernels interleaved in an order whose first place moves with the set's family
and its turn (rotation; each kernel's mean by place goes to the report). Every candidate replay's output is checked against the reference of that
set, so what is timed is what was verified: a graph that replays an answer computed at capture, or that
behaves differently under capture, fails here (bench:stale_output, bench:wrong_output). A sample of the
candidate's replay outputs is saved for the parent's referee, which regenerates the sets itself. Held-out
shapes, drawn per run from the operating range, are timed like the others (the generalisation gap).
The parent turns the raw times into means, tails and intervals (pipeline/bench_report.py)."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import threading
import time
import traceback
from pathlib import Path

import torch

from ..targets.base import as_outputs
from . import profile, stats, tamper
from .protocol import candidate_text, derive_seed

L2_FLUSH_BYTES = 256 << 20  # > 60 MB of H200 L2
SETS = {"smoke": 64, "full": 128}  # input sets per shape, each timed once per kernel
SAVED_SETS = 4  # candidate replay outputs per shape saved for the parent's referee
HELD_OUT = 2  # shapes drawn per run from the operating range, never shown to a proposer
HOST_REPLAYS = 10
HOST_TRIES = 3  # host-timed blocks tried before a gap between the clocks counts
CAPTURE_TIMEOUT_S = 60.0  # a capture that hangs (a sync inside capture, say) ends the child at once
SHAPE_TIMEOUT_S = 240.0
# A harness spin on the GPU right before each timed replay (~50 us at 2 GHz): the host then has that long to
# enqueue the start event and the replay, so the GPU never waits for the host inside a timed pair
# (docs/benchmark.md, "The place in the order").
HOLD_CYCLES = 100_000
DEVICE = "cuda"  # tests swap in "cpu" together with a fake capture
_spin = torch.cuda._sleep  # taken before any candidate code exists in this process


def _sets(profile: str) -> int:
    return SETS.get(profile, SETS["smoke"])


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


def _hold() -> None:
    if DEVICE == "cuda":
        _spin(HOLD_CYCLES)


def rotation(j: int, n_kernels: int, n_families: int) -> int:
    """Who goes first at input set j (family j mod F, turn j // F over the families): family + turn, mod the
    kernels. Over every K turns each kernel goes first equally often and on every family, so a kernel's place
    in the order is not tied to a family: j mod K, with three kernels and six families, put the candidate first
    on two families only."""
    families = max(1, n_families)
    return (j % families + j // families) % n_kernels


def _host_timed(replay, perf) -> tuple[float, float]:
    """(host wall time, event time) per replay, medians of single synchronised replays, each bracketed by
    both clocks, so that the two compare the same replays. A machine-wide slow spell slows both alike; a
    gap that goes away on a second try was the host's, not the candidate's (docs/benchmark.md)."""
    best = None
    for _ in range(HOST_TRIES):
        host, events = [], []
        for _ in range(HOST_REPLAYS):  # medians of single replays: robust to a preemption
            start, end = _event(), _event()
            _sync()
            h0 = perf()
            start.record()
            replay()
            end.record()
            _sync()
            host.append((perf() - h0) * 1e6)
            events.append(start.elapsed_time(end) * 1000.0)
        pair = (sorted(host)[len(host) // 2], sorted(events)[len(events) // 2])
        if best is None or pair[0] - pair[1] < best[0] - best[1]:
            best = pair
        if not stats.host_gap(*best):
            break
        time.sleep(0.05)
    return best


class _Watchdog:
    """Ends the child with a finding of the harness's own when a step does not return in time: a hung
    capture or replay would otherwise hold the GPU until the parent's timeout and end as a crash."""

    def __init__(self, out, seconds: float, code: str, what: str):
        self._timer = threading.Timer(seconds, self._fire, args=(out, code, f"{what} did not finish in {seconds:.0f} s"))
        self._timer.daemon = True

    @staticmethod
    def _fire(out, code, message):
        with contextlib.suppress(Exception):
            out.send(type="fatal", code=code, message=message)
        os._exit(3)

    def __enter__(self):
        self._timer.start()
        return self

    def __exit__(self, *exc):
        self._timer.cancel()


def _cudart():
    """The CUDA runtime this process has loaded (found through /proc/self/maps), or None."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/maps").read_text().splitlines():
            if "libcudart.so" in line:
                return ctypes.CDLL(line.split()[-1])
    return None


class _PersistingL2:
    """Data pinned in persisting L2 by an access-policy window survives a memset flush. The limit for
    persisting lines is set to 0 and persisting lines are reset before every timed round."""

    def __init__(self):
        self.lib = _cudart() if DEVICE == "cuda" else None
        self.applied = False
        if self.lib is not None:
            # cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize = 0x06, 0)
            self.applied = self.lib.cudaDeviceSetLimit(ctypes.c_int(0x06), ctypes.c_size_t(0)) == 0

    def reset(self) -> None:
        if self.lib is not None:
            self.lib.cudaCtxResetPersistingL2Cache()


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
    for i, shape in enumerate(shapes):  # held-out shapes are drawn only after the secret: not warmed
        with contextlib.suppress(Exception):  # a device fault, say: the benchmark meets it again and reports it
            inputs = target.make_inputs(shape, derive_seed(0, "warmup", i, 0), DEVICE)
            for fn in kernels:
                with contextlib.suppress(Exception):
                    fn(*inputs)
            _sync()
            del inputs
            if DEVICE == "cuda":
                torch.cuda.empty_cache()


def held_out_shapes(target, seed: int) -> list[dict]:
    """Shapes drawn per run from the target's operating range (the parent draws the same ones)."""
    return [dict(target.random_shape("full", derive_seed(seed, "held_out", h)), values="normal")
            for h in range(HELD_OUT)]


def families_of(target, shape: dict) -> tuple:
    """The value families a shape's input sets rotate over: the target's, or the shape's own one."""
    return tuple(getattr(target, "value_families", ()) or (shape.get("values"),))


def set_family(target, shape: dict, j: int) -> str:
    """The value family of input set j: it rotates over the target's families."""
    families = families_of(target, shape)
    return families[j % len(families)]


def set_inputs(target, shape: dict, seed: int, index: int, j: int, device: str | None = None):
    """Input set j of benchmark shape `index`."""
    return target.make_inputs(dict(shape, values=set_family(target, shape, j)),
                              derive_seed(seed, "bench", index, j), device or DEVICE)


def _load(buffers, fresh) -> None:
    for dst, src in zip(buffers, fresh):
        if isinstance(dst, torch.Tensor):
            dst.copy_(src)


def time_set(j: int, fresh, graphs: dict, first: int, flush, starts: dict, ends: dict, places: dict) -> None:
    """Input set j's timed calls, one per kernel of `graphs` (name: (graph, outputs, input buffers)), starting
    with the kernel at index `first`: the set is copied into its buffers, its outputs poisoned, L2 flushed,
    the GPU held by the harness's spin, then one replay between a pair of events. No garbage collection runs
    meanwhile. Each call's place in the order goes to `places`."""
    names = list(graphs)
    gc.disable()
    try:
        for q in range(len(names)):
            name = names[(q + first) % len(names)]
            places[name].append(q)
            graph, outputs, buffers = graphs[name]
            _load(buffers, fresh)
            _poison(outputs)
            flush.zero_()
            _hold()
            starts[name][j].record()
            graph.replay()
            ends[name][j].record()
    finally:
        gc.enable()


def _same(a, b) -> bool:
    return all(x.shape == y.shape and torch.equal(x, y) for x, y in zip(a, b))


def benchmark(cfg, out, target, candidate, incumbent, default, seed: int, perf) -> None:
    kernels = [("candidate", candidate), ("incumbent", incumbent), ("incumbent_aa", incumbent)]
    if incumbent is not default:
        kernels.append(("default", default))
    names = [n for n, _ in kernels]
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device=DEVICE)
    persisting = _PersistingL2()
    n_sets = _sets(cfg["profile"])
    saved_dir = Path(cfg["outputs_dir"]) if cfg.get("outputs_dir") else None
    listed = list(cfg["shapes"])
    shapes = [(s, False) for s in listed] + [(s, True) for s in held_out_shapes(target, seed)]
    for i, (shape, held_out) in enumerate(shapes):
        t0 = perf()
        msg = {"type": "bench_shape", "index": i, "shape": shape, "held_out": held_out, "findings": [],
               "kernels": {}, "l2_persisting_reset": persisting.applied}
        stop = False
        try:
            with _Watchdog(out, SHAPE_TIMEOUT_S, "bench:timeout", f"benchmark shape {i}"):
                stop = _bench_shape(msg, target, shape, i, kernels, names, flush, persisting, n_sets, seed, perf,
                                    out, saved_dir)
            if DEVICE == "cuda":
                torch.cuda.empty_cache()
        except torch.OutOfMemoryError as e:
            msg["findings"].append({"code": "bench:oom", "message": candidate_text(e)})
        except Exception:
            msg["findings"].append({"code": "bench:exception", "message": candidate_text(traceback.format_exc())})
        msg["seconds"] = perf() - t0
        out.send(**msg)
        if stop:  # a failed capture leaves the CUDA RNG mid-capture: every later shape would fail on its inputs
            break


def _profile(candidate_graph, flush, target, shape, seed, index, families, times, saved_dir) -> dict:
    """The candidate's per-kernel times on the last timed set's inputs (still in its buffers; its value family
    named), and again on the slowest family's first set when that family is SLOW_FAMILY_FACTOR times slower
    than the fastest (profile.slowest_family): where an input-determined slow path spends its time."""
    graph, _, buffers = candidate_graph
    result = profile.capture(graph.replay, flush.zero_, workdir=saved_dir)
    result["family"] = families[-1]
    slow = profile.slowest_family(times, families)
    if slow is not None:
        _load(buffers, set_inputs(target, shape, seed, index, slow["first_set"]))
        result["slowest_family"] = dict(slow, **profile.capture(graph.replay, flush.zero_, workdir=saved_dir))
    return result


def _tamper_check(msg) -> None:
    """guard:tamper / guard:thread findings (pipeline/tamper.py) after the candidate's code ran, each once."""
    seen = {(f["code"], f["message"]) for f in msg["findings"]}
    msg["findings"] += [f for f in tamper.check() if (f["code"], f["message"]) not in seen]


def _bench_shape(msg, target, shape, i, kernels, names, flush, persisting, n_sets, seed, perf, out, saved_dir):
    """Time one shape into `msg`; True when the benchmark must stop here (a kernel's capture failed)."""
    capture_inputs = target.make_inputs(shape, derive_seed(seed, "bench", i, "capture"), DEVICE)
    graphs = {}
    for name, fn in kernels:
        buffers = tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in capture_inputs)
        try:
            with _Watchdog(out, CAPTURE_TIMEOUT_S, "bench:graph_capture" if name == "candidate" else "bench:harness_error",
                           f"CUDA graph capture of the {name}"):
                graph, outputs = _capture(fn, buffers)
        except Exception:
            code = "bench:graph_capture" if name == "candidate" else "bench:harness_error"
            msg["findings"].append({"code": code, "message": f"{name}: CUDA graph capture failed (the benchmark "
                                    "stops at this shape): " + candidate_text(traceback.format_exc())})
            with contextlib.suppress(Exception):
                _sync()
            return True
        graphs[name] = (graph, outputs, buffers)
        if name == "candidate":
            _tamper_check(msg)
    del capture_inputs
    graph, outputs, _ = graphs["candidate"]
    graph.replay()  # untimed, on the capture-time inputs: an answer that never changes after this is stale
    _sync()
    previous = [t.clone() for t in outputs]
    starts = {n: [_event() for _ in range(n_sets)] for n in names}
    ends = {n: [_event() for _ in range(n_sets)] for n in names}
    places = {n: [] for n in names}  # each timed call's place in its set's order (0: first)
    n_families = len(families_of(target, shape))
    check_failures, stale, first_failure = 0, 0, None
    saved = []
    save_at = set(range(0, n_sets, max(1, n_sets // SAVED_SETS))[:SAVED_SETS])
    wall0 = perf()
    for j in range(n_sets):
        fresh = set_inputs(target, shape, seed, i, j)
        persisting.reset()
        time_set(j, fresh, graphs, rotation(j, len(names), n_families), flush, starts, ends, places)
        _, outputs, _ = graphs["candidate"]
        result = outputs[0] if len(outputs) == 1 else tuple(outputs)
        ok, _, message = target.check(result, fresh, target.reference(fresh))
        if not ok:
            check_failures += 1
            was_stale = _same(outputs, previous)
            stale += was_stale
            if first_failure is None:
                first_failure = (j, was_stale, message)
        previous = [t.clone() for t in outputs]
        if j in save_at and saved_dir is not None:
            name = f"bench-{i}-{j}.pt"
            torch.save([t.detach().cpu() for t in outputs], saved_dir / name)
            saved.append({"set": j, "file": name})
        del fresh
    _sync()
    wall_s = perf() - wall0
    _tamper_check(msg)  # the replays ran candidate kernels only, but its Python ran at capture: check again
    for name in names:
        times = [s.elapsed_time(e) * 1000.0 for s, e in zip(starts[name], ends[name])]
        host_us, host_event_us = _host_timed(graphs[name][0].replay, perf)
        msg["kernels"][name] = {"times_us": times, "places": places[name], "host_us": host_us,
                                "host_event_us": host_event_us, "stale_replays": stale if name == "candidate" else None}
    families = [set_family(target, shape, j) for j in range(n_sets)]
    if DEVICE == "cuda":  # where the time goes: a few profiled replays after the timed ones, never scored
        try:
            msg["profile"] = _profile(graphs["candidate"], flush, target, shape, seed, i, families,
                                      msg["kernels"]["candidate"]["times_us"], saved_dir)
        except Exception as e:  # the profile is context for people and proposers; its failure is not the candidate's
            msg["profile"] = {"error": candidate_text(f"{type(e).__name__}: {e}")[:300]}
    if first_failure is not None:
        j, was_stale, message = first_failure
        code = "bench:stale_output" if was_stale else "bench:wrong_output"
        msg["findings"].append({"code": code, "message": (
            f"{check_failures} of {n_sets} timed replays on fresh inputs failed the check; the first, set {j}: "
            + ("its output was the answer to the previous inputs. " if was_stale else "") + message[:500])})
    msg.update(rounds=n_sets, input_sets=n_sets, timed_wall_s=wall_s, saved=saved,
               families=families,
               check={"pass": first_failure is None, "failures": check_failures})
