"""evaluate_distributed(spec) -> report: guard, verify, benchmark for a multi-process target.

The parent spawns world_size rank processes (torch.multiprocessing, start method spawn, never
fork: a forked CUDA or NCCL state is unusable), each runs rank.rank_main. The parent owns the
secret seed (sent to a rank only after its candidate loaded), judges verification outputs against
the float64 reference it computes from every rank's inputs, and turns the ranks' raw times into
the same benchmark entries as the single-process pipeline (evaluate.bench_results). The report is
`ark.report/1` with `world_size` and `ranks` added.

Not like the single-process pipeline: the ranks are not sandboxed (sandbox.run_child runs one
child as an unprivileged user with seccomp; ranks need a shared rendezvous file and, on CUDA,
peer access to each other's memory). They run as the worker's user; see docs/allreduce.md.
"""

from __future__ import annotations

import math
import os
import secrets
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .. import hardware
from ..pipeline.child_run import _same_bits
from ..pipeline.bench_report import bench_results
from ..pipeline.evaluate import evaluate as _single_evaluate  # noqa: F401  (loads the module)
from ..pipeline.guard import check_candidate
from ..pipeline.protocol import derive_seed
from ..targets.allreduce import DistributedTarget, get_multi_process_target
from .bench import merge_ranks
from .rank import rank_main

single = sys.modules["gpu_worker.pipeline.evaluate"]  # the module; gpu_worker.pipeline re-exports its function

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
    import torch.multiprocessing as mp

    world = cfg["world_size"]
    ctx = mp.get_context("spawn")
    out_q = ctx.SimpleQueue()
    seed_qs = [ctx.SimpleQueue() for _ in range(world)]
    run = RanksRun()
    t0 = time.monotonic()
    procs = mp.start_processes(rank_main, args=(cfg, out_q, seed_qs), nprocs=world, join=False, start_method="spawn")
    seeded: set[int] = set()

    def drain():
        while not out_q.empty():
            m = out_q.get()
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
        run.wall_s = time.monotonic() - t0
    return run


def _device() -> str:
    forced = os.environ.get("ARK_DEVICE")
    if forced in ("cpu", "cuda"):
        return forced
    return "cuda" if torch.cuda.is_available() else "cpu"


def _run_findings(run: RanksRun, stage: str) -> list[dict]:
    if run.timed_out:
        return [{"code": f"{stage}:timeout", "message": "the ranks ran past their time limit and were killed"}]
    if run.failed:
        return [{"code": f"{stage}:crash", "message": f"a rank died: {run.failed}"}]
    done = {m["rank"] for m in run.of("done")}
    if len(done) < max([m["rank"] for m in run.messages] + [0]) + 1 or not done:
        return [{"code": f"{stage}:crash", "message": f"ranks {sorted(done)} finished, not all of them"}]
    return []


def evaluate_distributed(spec: dict, *, on_progress=None) -> dict:
    """The multi-process pipeline on one candidate. Never raises for a bad candidate."""
    wall0 = time.monotonic()
    report = {"schema": single.SCHEMA, "candidate_id": spec.get("candidate_id"), "attempt": spec.get("attempt", 1),
              "target": spec.get("target"), "target_version": None, "profile": spec.get("profile", "smoke"),
              "mode": None, "hardware": None, "world_size": None,
              "isolation": {"sandboxed": False, "note": "multi-process ranks run as the worker's user (runner.py)"},
              "stages": {}, "summary": {"geomean_speedup": None, "geomean_ci95": None, "floor_fraction": None},
              "verdict": {}}
    stages = single._Stages(report, on_progress)
    try:
        _evaluate(spec, report, stages)
    except Exception:
        report["verdict"] = {"status": "error", "complete": False, "reasons": ["harness:exception"],
                             "message": traceback.format_exc()[-4000:]}
    report["wall_s"] = round(time.monotonic() - wall0, 3)
    return single._clean(report)


def _evaluate(spec: dict, report: dict, stages) -> None:
    try:
        target = get_multi_process_target(spec.get("target") or "")
    except KeyError as e:
        report["verdict"] = {"status": "error", "complete": False, "reasons": ["spec:unknown_target"], "message": str(e)}
        return
    device = _device()
    world = int(spec.get("world_size") or target.world_size)
    mode = "gpu" if device == "cuda" else "cpu"
    profile = spec.get("profile") if spec.get("profile") in ("smoke", "full") else "smoke"
    effective = profile if mode == "gpu" else "smoke"
    seed = int(spec["seed"]) if spec.get("seed") is not None else secrets.randbits(63)
    report.update(target_version=target.version, mode=mode, profile=profile, profile_effective=effective,
                  hardware=hardware.fingerprint(), world_size=world)
    if device == "cuda" and torch.cuda.device_count() < world:
        reason = f"needs {world} GPUs, this worker has {torch.cuda.device_count()}"
        for name in ("guard", "verify", "benchmark"):
            stages.put(name, {"status": "unavailable", "reason": reason})
        report["verdict"] = {"status": "error", "complete": False, "reasons": ["worker:needs_gpus"], "message": reason}
        return
    source = spec.get("source") or ""
    t = stages.start("guard")
    findings, info = check_candidate(source, target)
    stages.end("guard", t, {"status": "fail" if findings else "pass", "findings": findings, "dsl": info["dsl"],
                            "kernels": info["kernels"]})
    if findings:
        for name in ("verify", "benchmark"):
            stages.put(name, {"status": "skipped", "reason": "guard failed"})
        single._finish(report, target, stages)
        return
    scratch = Path(tempfile.mkdtemp(prefix="ark-dist-"))
    try:
        entry = _verify(spec, stages, target, source, info, device, effective, seed, world, scratch)
        if mode == "cpu":
            stages.put("benchmark", {"status": "unavailable", "reason": "timings need GPU workers"})
        elif entry["status"] != "pass":
            stages.put("benchmark", {"status": "skipped", "reason": "verification failed"})
        else:
            _benchmark(spec, report, stages, target, source, info, effective, seed, world, scratch)
        single._finish(report, target, stages)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


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


def _verify(spec, stages, target, source, info, device, profile, seed, world, scratch) -> dict:
    shapes = target.verify_shapes(profile, seed)
    t = stages.start("verify", shapes=len(shapes))
    timeout = float(spec.get("verify_timeout_s") or VERIFY_TIMEOUT_S["cpu" if device == "cpu" else profile])
    entry = verify_ranks(target, shapes=shapes, seed=seed, device=device, world=world, scratch=scratch,
                         source=source, info=info, profile=profile, timeout_s=timeout)
    return stages.end("verify", t, entry)


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
    return {"status": status, "shapes": per_shape, "findings": single._dedupe(findings), "ranks_env": env,
            "ranks_wall_s": round(run.wall_s, 3)}


def _benchmark(spec, report, stages, target, source, info, profile, seed, world, scratch) -> None:
    shapes = target.benchmark_shapes(profile)
    t = stages.start("benchmark", shapes=len(shapes))
    path = _write(scratch, "candidate_bench.py", source)
    inc = _write(scratch, "incumbent.py", spec["incumbent_source"]) if spec.get("incumbent_source") else None
    cfg = _cfg(target, info, "cuda", "bench", shapes, profile, world, path, scratch, inc)
    before = hardware.fingerprint()
    run = run_ranks(cfg, seed=seed, timeout_s=BENCH_TIMEOUT_S[profile])
    after = hardware.fingerprint()
    merged = merge_ranks(run.messages)
    ceil = spec.get("ceilings")  # measured link rate (bench/allreduce_h200x2.py); none claimed otherwise
    findings, per_shape, summary, claimed_s = bench_results(merged, target, ceil, run.wall_s)
    for m in run.of("fatal"):
        findings.append({"code": m.get("code", "harness:fatal"), "message": m.get("message", "")})
    findings += _run_findings(run, "benchmark") if not findings else []
    status = "fail" if findings else ("pass" if len(per_shape) == len(shapes) else "error")
    report["summary"] = summary
    stages.end("benchmark", t, {"status": status, "shapes": per_shape, "findings": single._dedupe(findings),
                                "clocks_before": single._clocks(before), "clocks_after": single._clocks(after),
                                "ranks_wall_s": round(run.wall_s, 3), "claimed_gpu_s": round(claimed_s, 4),
                                "ceilings": ceil})
