"""Timing inside each rank, CUDA only: the rules of pipeline/bench_child.py for a collective.

Per shape, on every rank: input sets rotated (fresh from the secret seed), each kernel's call
captured in a CUDA graph per set, outputs poisoned before and fingerprinted after every replay, L2
flushed, kernels interleaved round-robin, the first one chosen by pipeline/bench_child.rotation over the
sets (so that no kernel goes first on the same set every time), the GPU held by the harness's spin before
each timed replay, no garbage collection in the timed rounds, and each call's place in the order reported
(docs/benchmark.md, "The place in the order"). A collective's time is
its slowest rank's, so before every timed replay the ranks line up on a one-element NCCL
all-reduce (eager, outside the events); each rank records CUDA events around its own replay and
the parent takes the maximum over ranks per round, then means, tails and bootstrap intervals
(pipeline/bench_report.bench_results, as for every target). After timing, every rank checks its graph
outputs against the float64 reference of all ranks' inputs, rebuilt from the seeds.

Not run yet: needs the 2-GPU kind (docs/allreduce.md).
"""

from __future__ import annotations

import gc
import time
import traceback

import torch
import torch.distributed as dist

from ..pipeline.bench_child import L2_FLUSH_BYTES, _capture, _fingerprint, _hold, _poison, rotation

# A collective's inputs are a few buffers per rank: a handful of sets rotated over the rounds is enough to
# defeat caching by pointer; the per-set tail analysis of the single-GPU benchmark does not apply here.
MAX_SETS = 8
ROTATE_BYTES = 256 << 20
from ..pipeline.protocol import derive_seed

HOST_REPLAYS = 10


def _rounds(profile: str) -> int:
    return 20 if profile == "smoke" else 50


def _input_bytes(inputs) -> int:
    return sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))


def benchmark(cfg, target, candidate, incumbent, default, comm, seed: int, send) -> None:
    kernels = [("candidate", candidate), ("incumbent", incumbent), ("incumbent_aa", incumbent)]
    if incumbent is not default:
        kernels.append(("default", default))
    rank = comm.rank
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    line_up = torch.zeros(1, dtype=torch.float32, device="cuda")
    rounds = _rounds(cfg["profile"])
    for i, shape in enumerate(cfg["shapes"]):
        msg = {"type": "bench_shape", "index": i, "shape": shape, "findings": [], "kernels": {}}
        try:
            set_seeds = [derive_seed(seed, "bench", i, 0)]
            first = target.rank_inputs(shape, set_seeds[0], rank, "cuda")
            n_sets = max(2, min(MAX_SETS, -(-ROTATE_BYTES // max(1, _input_bytes(first)))))
            set_seeds += [derive_seed(seed, "bench", i, j) for j in range(1, n_sets)]
            sets = [first] + [target.rank_inputs(shape, s, rank, "cuda") for s in set_seeds[1:]]
            graphs = {}
            for name, fn in kernels:
                try:
                    graphs[name] = [_capture(fn, tuple(inputs) + (comm,)) for inputs in sets]
                except Exception:
                    code = "bench:graph_capture" if name == "candidate" else "bench:harness_error"
                    msg["findings"].append({"code": code, "message": f"{name}: CUDA graph capture failed: "
                                            + traceback.format_exc()[-2000:]})
                    break
            # every rank must agree to go on, or they would wait on each other's collectives
            ok = torch.tensor([0.0 if msg["findings"] else 1.0], device="cuda")
            dist.all_reduce(ok, op=dist.ReduceOp.MIN, group=comm.group)
            if ok.item() < 1.0:
                send(**msg)
                continue
            expected = {}
            for name, _ in kernels:
                expected[name] = []
                for graph, outputs in graphs[name]:
                    _poison(outputs)
                    graph.replay()
                    slot = torch.zeros(2, dtype=torch.int64, device="cuda")
                    _fingerprint(outputs, slot)
                    expected[name].append(slot)
            names = [n for n, _ in kernels]
            starts = {n: [torch.cuda.Event(enable_timing=True) for _ in range(rounds)] for n in names}
            ends = {n: [torch.cuda.Event(enable_timing=True) for _ in range(rounds)] for n in names}
            prints = {n: torch.zeros(rounds, 2, dtype=torch.int64, device="cuda") for n in names}
            places = {n: [] for n in names}
            torch.cuda.synchronize()
            gc.disable()
            try:
                for r in range(rounds):
                    j = r % n_sets
                    first = rotation(r, len(names), n_sets)
                    for q in range(len(names)):
                        name = names[(q + first) % len(names)]
                        places[name].append(q)
                        graph, outputs = graphs[name][j]
                        _poison(outputs)
                        flush.zero_()
                        dist.all_reduce(line_up, group=comm.group)
                        _hold()
                        starts[name][r].record()
                        graph.replay()
                        ends[name][r].record()
                        _fingerprint(outputs, prints[name][r])
            finally:
                gc.enable()
            torch.cuda.synchronize()
            for name in names:
                times = [s.elapsed_time(e) * 1000.0 for s, e in zip(starts[name], ends[name])]
                want = torch.stack([expected[name][r % n_sets] for r in range(rounds)])
                stale = int((prints[name] != want).any(1).sum())
                host, host_events = [], []  # each replay on both clocks, as in pipeline/bench_child.py
                for _ in range(HOST_REPLAYS):
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    dist.barrier(group=comm.group)
                    torch.cuda.synchronize()
                    h0 = time.perf_counter()
                    start.record()
                    graphs[name][0][0].replay()
                    end.record()
                    torch.cuda.synchronize()
                    host.append((time.perf_counter() - h0) * 1e6)
                    host_events.append(start.elapsed_time(end) * 1000.0)
                host_us = sorted(host)[len(host) // 2]
                host_event_us = sorted(host_events)[len(host_events) // 2]
                check = {"pass": True, "max_error": 0.0, "message": ""}
                if name == "candidate" or stale:
                    for j, inputs in enumerate(sets):
                        _, outputs = graphs[name][j]
                        ref = target.reference(target.all_inputs(shape, set_seeds[j], "cpu"))
                        ok_, err, message = target.check(outputs[0] if len(outputs) == 1 else tuple(outputs),
                                                         inputs, ref)
                        check = {"pass": ok_, "max_error": err, "message": message}
                        if not ok_:
                            break
                msg["kernels"][name] = {"times_us": times, "places": places[name], "host_us": host_us,
                                        "host_event_us": host_event_us, "stale_replays": stale, "check": check}
                if name == "candidate" and stale:
                    msg["findings"].append({"code": "bench:stale_output", "message":
                                            f"{stale} of {rounds} timed replays left outputs that differ from "
                                            "the same graph's untimed replay"})
                if name == "candidate" and not check["pass"]:
                    msg["findings"].append({"code": "bench:wrong_output",
                                            "message": f"graph replay output fails the check: {check['message']}"})
            msg.update(rounds=rounds, input_sets=n_sets)
            del graphs, sets, first
            torch.cuda.empty_cache()
        except torch.OutOfMemoryError as e:
            msg["findings"].append({"code": "bench:oom", "message": str(e)[:2000]})
        except Exception:
            msg["findings"].append({"code": "bench:exception", "message": traceback.format_exc()[-3000:]})
        send(**msg)


def merge_ranks(messages: list[dict]) -> list[dict]:
    """Per shape, one bench_shape message as the single-process child writes it: per round the
    slowest rank's time, the slowest rank's host time, stale replays summed, findings of all ranks."""
    by_index: dict[int, list[dict]] = {}
    for m in messages:
        if m.get("type") == "bench_shape":
            by_index.setdefault(m["index"], []).append(m)
    merged = []
    for index in sorted(by_index):
        ms = sorted(by_index[index], key=lambda m: m.get("rank", 0))
        out = {"type": "bench_shape", "index": index, "shape": ms[0]["shape"], "kernels": {},
               "findings": [dict(f, rank=m.get("rank")) for m in ms for f in m.get("findings", [])],
               "rounds": ms[0].get("rounds"), "input_sets": ms[0].get("input_sets"), "ranks": len(ms)}
        names = set.intersection(*(set(m.get("kernels", {})) for m in ms)) if ms else set()
        for name in sorted(names):
            per_rank = [m["kernels"][name] for m in ms]
            rounds = min(len(k["times_us"]) for k in per_rank)
            out["kernels"][name] = {
                "times_us": [max(k["times_us"][r] for k in per_rank) for r in range(rounds)],
                "times_us_by_rank": [k["times_us"][:rounds] for k in per_rank],
                "places": (per_rank[0].get("places") or [])[:rounds] or None,   # the same order on every rank
                "host_us": max((k.get("host_us") or 0.0) for k in per_rank),
                "host_event_us": max((k.get("host_event_us") or 0.0) for k in per_rank) or None,
                "stale_replays": sum(k.get("stale_replays") or 0 for k in per_rank),
            }
        merged.append(out)
    return merged
