"""DistributedEvaluation: the pipeline (pipeline/evaluate.py) for a multi-process target.

The parent spawns world_size rank processes (torch.multiprocessing, start method spawn, never
fork: a forked CUDA or NCCL state is unusable), each runs rank.rank_main. The parent owns the
secret seed (sent to a rank only after its candidate loaded), judges verification outputs against
the float64 reference it computes from every rank's inputs, and turns the ranks' raw times into
the same benchmark entries as the single-process pipeline (bench_report.bench_results). The report is
the same contract (gpu_worker/contract.py) with `world_size` set.

Not like the single-process pipeline: the ranks are not sandboxed (sandbox.run_child runs one
child as an unprivileged user with seccomp; ranks need a shared rendezvous file and, on CUDA,
peer access to each other's memory). They run as the worker's user; see docs/allreduce.md.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path

import torch
import torch.multiprocessing as mp

from .. import hardware
from ..contract import BenchmarkStage, EvaluationSpec, Summary, VerifyStage, to_json
from ..pipeline.bench_report import bench_results
from ..pipeline.verify_child import _same_bits
from ..pipeline.evaluate import Evaluation, StopEvaluation, clocks, dedupe
from ..pipeline.protocol import derive_seed
from ..targets.allreduce import DistributedTarget, get_multi_process_target
from .bench import merge_ranks
from .rank import rank_main

VERIFY_TIMEOUT_S = {"cpu": 240.0, "smoke": 180.0, "full": 420.0}
BENCH_TIMEOUT_S = {"smoke": 300.0, "full": 600.0}


@dataclass
class RanksRun:
    messages: list[dict] = field(default_factory=list)
    timed_out: bool = False
    failed: str | None = None  # a rank that died: how
    wall_s: float = 0.0

    def of(self, kind: str) -> list[dict]:
        return [m for m in self.messages if m.get("type") == kind]


def run_ranks(cfg: dict, *, seed: int, timeout_s: float) -> RanksRun:
    """Spawn cfg["world_size"] ranks, hand each the seed after its candidate loaded, collect messages."""
    world = cfg["world_size"]
    ctx = mp.get_context("spawn")
    # One pipe per rank, and the parent keeps only the read ends once the ranks exist: a rank that dies in the
    # middle of a message closes its pipe, and the read ends in EOFError instead of waiting for the rest
    # (with one queue shared by all ranks, whose write end the parent also held, it waited forever).
    pipes = [ctx.Pipe(duplex=False) for _ in range(world)]
    seed_qs = [ctx.SimpleQueue() for _ in range(world)]
    run = RanksRun()
    t0 = time.monotonic()
    procs = mp.start_processes(rank_main, args=(cfg, [w for _, w in pipes], seed_qs), nprocs=world, join=False,
                               start_method="spawn")
    for _, writer in pipes:
        writer.close()
    readers = [r for r, _ in pipes]
    seeded: set[int] = set()

    def drain():
        while ready := wait(readers, timeout=0):
            for reader in ready:
                try:
                    m = reader.recv()
                except (EOFError, OSError):  # the rank ended (or died mid-message): nothing more comes
                    readers.remove(reader)
                    reader.close()
                    continue
                run.messages.append(m)
                if m.get("type") == "load" and m.get("status") == "pass" and m["rank"] not in seeded:
                    seeded.add(m["rank"])
                    seed_qs[m["rank"]].put(str(seed))

    try:
        while True:
            drain()
            try:
                if procs.join(timeout=0.05):
                    break
            except Exception as e:  # a rank raised or died; join() has stopped the others
                run.failed = f"{type(e).__name__}: {str(e)[-1500:]}"
                break
            if time.monotonic() - t0 > timeout_s:
                run.timed_out = True
                break
        drain()
    finally:
        for p in procs.processes:
            if p.is_alive():
                p.kill()
        for p in procs.processes:
            p.join(5)
        for reader in readers:
            reader.close()
        run.wall_s = time.monotonic() - t0
    return run


def _run_findings(run: RanksRun, stage: str) -> list[dict]:
    if run.timed_out:
        return [{"code": f"{stage}:timeout", "message": "the ranks ran past their time limit and were killed"}]
    if run.failed:
        return [{"code": f"{stage}:crash", "message": f"a rank died: {run.failed}"}]
    done = {m["rank"] for m in run.of("done")}
    if len(done) < max([m["rank"] for m in run.messages] + [0]) + 1 or not done:
        return [{"code": f"{stage}:crash", "message": f"ranks {sorted(done)} finished, not all of them"}]
    return []


class DistributedEvaluation(Evaluation):
    """The pipeline for a target whose candidate runs in world_size processes at once: the same stages
    and verdict; verify and benchmark spawn the ranks; no early bench child, no e2e slot."""

    scratch_prefix = "ark-dist-"
    verify_timeouts = VERIFY_TIMEOUT_S

    def load_target(self):
        try:
            return get_multi_process_target(self.spec.target)
        except KeyError as e:
            raise StopEvaluation("spec:unknown_target", str(e)) from None

    def prepare(self) -> None:
        super().prepare()
        self.world = int(self.spec.world_size or self.target.world_size)
        self.report.world_size = self.world
        self.report.isolation = {"sandboxed": False, "note": "multi-process ranks run as the worker's user (runner.py)"}
        if self.on_gpu and torch.cuda.device_count() < self.world:
            reason = f"needs {self.world} GPUs, this worker has {torch.cuda.device_count()}"
            for name in ("guard", "verify", "benchmark"):
                self.put(name, {"status": "unavailable", "reason": reason})
            raise StopEvaluation("worker:needs_gpus", reason)

    def sweep(self) -> None:
        pass  # rank scratch dirs go with their evaluation (the ranks are the worker's own processes)

    def start_bench_child(self):
        return None  # the ranks start when the benchmark does

    def verify(self) -> VerifyStage:
        shapes = self.target.verify_shapes(self.profile, self.seed)
        t = self.begin("verify", shapes=len(shapes))
        entry = verify_ranks(self.target, shapes=shapes, seed=self.seed, device=self.device, world=self.world,
                             scratch=self.scratch_root, source=self.spec.source, info=self.info,
                             profile=self.profile, timeout_s=self.verify_timeout_s())
        return self.end("verify", t, entry)

    def counters(self) -> None:
        """No Nsight Compute pass for ranks yet: ncu would have to launch every rank (docs/allreduce.md)."""

    def benchmark(self) -> BenchmarkStage:
        shapes = self.target.benchmark_shapes(self.profile)
        t = self.begin("benchmark", shapes=len(shapes))
        path = _write(self.scratch_root, "candidate_bench.py", self.spec.source)
        inc = self.spec.incumbent_source
        inc_path = _write(self.scratch_root, "incumbent.py", inc) if inc else None
        cfg = _cfg(self.target, self.info, "cuda", "bench", shapes, self.profile, self.world, path,
                   self.scratch_root, inc_path)
        before = hardware.fingerprint()
        run = run_ranks(cfg, seed=self.seed, timeout_s=BENCH_TIMEOUT_S[self.profile])
        after = hardware.fingerprint()
        ceil = self.spec.ceilings  # measured link rate (bench/allreduce_h200x2.py); none claimed otherwise
        findings, per_shape, summary, claimed_s = bench_results(merge_ranks(run.messages), self.target, ceil,
                                                                run.wall_s)
        for m in run.of("fatal"):
            findings.append({"code": m.get("code", "harness:fatal"), "message": m.get("message", "")})
        findings += _run_findings(run, "benchmark") if not findings else []
        status = "fail" if findings else ("pass" if len(per_shape) == len(shapes) else "error")
        self.report.summary = Summary.from_dict(summary, "summary")
        return self.end("benchmark", t, {
            "status": status, "shapes": per_shape, "findings": dedupe(findings),
            "clocks_before": clocks(before), "clocks_after": clocks(after), "ranks_wall_s": round(run.wall_s, 3),
            "claimed_gpu_s": round(claimed_s, 4), "ceilings": ceil})


def evaluate_distributed(spec: EvaluationSpec | dict, *, on_progress=None) -> dict:
    """The multi-process pipeline on one candidate; the report as JSON-ready data. Never raises for a bad
    candidate."""
    return to_json(DistributedEvaluation(spec, on_progress=on_progress).run())


def _cfg(target, info, device, mode, shapes, profile, world, path, scratch, incumbent_path=None) -> dict:
    outputs = scratch / f"{mode}-outputs"
    outputs.mkdir(parents=True, exist_ok=True)
    rdzv = scratch / f"{mode}-rendezvous"
    if rdzv.exists():
        rdzv.unlink()  # a FileStore left by an earlier run would mix two rendezvous
    capacity = max(target.message_bytes(s) for s in shapes) if shapes else 1024
    return {"target": target.name, "device": device, "mode": mode, "shapes": shapes, "profile": profile,
            "world_size": world, "dsl": info["dsl"], "kernels": info["kernels"], "candidate_path": str(path) if path else None,
            "incumbent_path": str(incumbent_path) if incumbent_path else None, "outputs_dir": str(outputs),
            "rendezvous": str(rdzv), "capacity_bytes": max(1024, -(-capacity // 1024) * 1024)}


def _write(scratch: Path, name: str, source: str) -> Path:
    path = scratch / name
    path.write_text(source)
    return path


def judge_shape(target: DistributedTarget, shape: dict, index: int, seed: int, outputs_dir: Path,
                files_by_rank: dict[int, list[str]], world: int) -> dict:
    """{pass, max_error, message, findings} for one shape: every rank's two saved outputs (first
    inputs, then inputs refreshed in place) against the float64 reference of all ranks' inputs; all
    ranks must return the same bits."""
    findings, max_error, message = [], 0.0, "ok"
    results = {}
    for which, label in ((0, "a"), (1, "c")):
        all_inputs = target.all_inputs(shape, derive_seed(seed, "verify", index, which), "cpu")
        ref = target.reference(all_inputs)
        for rank in range(world):
            name = f"verify_{index}_r{rank}_{label}.pt"
            path = outputs_dir / name
            if name not in files_by_rank.get(rank, []) or not path.is_file():
                return {"pass": False, "max_error": None, "message": f"rank {rank}: no {name}",
                        "findings": [{"code": "verify:missing_output", "message": f"rank {rank}: no {name}"}]}
            try:
                tensors = torch.load(path, map_location="cpu", weights_only=True)
                if not isinstance(tensors, list) or not all(type(t) is torch.Tensor for t in tensors):
                    raise ValueError("saved outputs are not a list of plain tensors")
            except Exception as e:
                return {"pass": False, "max_error": None, "message": f"rank {rank}: unreadable outputs",
                        "findings": [{"code": "verify:missing_output", "message": str(e)[:500]}]}
            results[(which, rank)] = tensors
            output = tensors[0] if len(tensors) == 1 else tuple(tensors)
            ok, err, msg = target.check(output, all_inputs[rank], ref)
            if err is not None and not math.isnan(err):
                max_error = max(max_error, err)
            if not ok and not findings:
                code = "verify:nan" if "NaN" in msg else ("verify:wrong" if which == 0 else "verify:stale_result")
                prefix = "" if which == 0 else "after the inputs were refreshed in place: "
                findings.append({"code": code, "message": f"rank {rank}: {prefix}{msg}"})
                message = f"rank {rank}: {msg}"
    if not findings:
        for which in (0, 1):
            base = results[(which, 0)]
            for rank in range(1, world):
                other = results[(which, rank)]
                if len(base) != len(other) or not all(_same_bits(a, b) for a, b in zip(base, other)):
                    findings.append({"code": "verify:rank_mismatch",
                                     "message": f"rank {rank} returned different bits from rank 0"})
                    message = findings[-1]["message"]
                    break
            if findings:
                break
    return {"pass": not findings, "max_error": max_error if math.isfinite(max_error) else None, "message": message,
            "findings": findings}


def verify_ranks(target: DistributedTarget, *, shapes: list[dict], seed: int, device: str, world: int, scratch: Path,
                 source: str | None = None, info: dict | None = None, profile: str = "smoke",
                 timeout_s: float = 240.0) -> dict:
    """Verify on `shapes` in `world` spawned ranks; the verify stage entry (status, shapes, findings).
    source=None verifies the target's default kernel (the harness's own: no evidence checks)."""
    info = info or {"dsl": "default", "kernels": []}
    path = _write(scratch, "candidate.py", source) if source is not None else None
    cfg = _cfg(target, info, device, "verify", shapes, profile, world, path, scratch)
    cfg["use_default"] = source is None
    run = run_ranks(cfg, seed=seed, timeout_s=timeout_s)
    findings: list[dict] = []
    for m in run.of("fatal"):
        findings.append({"code": m.get("code", "harness:fatal"), "message": f"rank {m['rank']}: {m.get('message', '')}"})
    for m in run.of("load"):
        if m.get("status") == "fail":
            findings += m.get("findings", [])
    env = {m["rank"]: m["env"] for m in run.of("env")}
    per_shape = []
    for i, shape in enumerate(shapes):
        msgs = {m["rank"]: m for m in run.of("verify_shape") if m["index"] == i}
        entry = {"shape": shape, "pass": False, "max_error": None, "message": "not run"}
        shape_findings = [dict(f, rank=r) for r, m in sorted(msgs.items()) for f in m.get("findings", [])]
        if len(msgs) == world and all(m.get("status") == "ran" and m.get("files") for m in msgs.values()) \
                and not shape_findings:
            verdict = judge_shape(target, shape, i, seed, Path(cfg["outputs_dir"]),
                                  {r: m["files"] for r, m in msgs.items()}, world)
            shape_findings += verdict["findings"]
            entry.update(max_error=verdict["max_error"], message=verdict["message"], **{"pass": verdict["pass"]})
        if msgs:
            entry["launches"] = sorted({n for m in msgs.values() for n in m.get("launches", [])})
        if shape_findings:
            entry["pass"] = False
            entry["message"] = f"{shape_findings[0]['code']}: {shape_findings[0]['message'][:300]}"
        findings += [dict(f, shape_index=i) for f in shape_findings]
        per_shape.append(entry)
    if not findings:
        findings += _run_findings(run, "verify")
    status = "fail" if findings else ("pass" if per_shape and all(e["pass"] for e in per_shape) else "error")
    if status == "error":
        findings.append({"code": "verify:incomplete", "message": "a shape was not judged"})
    return {"status": status, "shapes": per_shape, "findings": dedupe(findings), "ranks_env": env,
            "ranks_wall_s": round(run.wall_s, 3)}
