"""One rank of a multi-process evaluation: started by runner.py with the spawn start method.

Order: force NVLink multicast off, join the process group (gloo on CPU, NCCL on CUDA, rendezvous
through a file in the scratch directory), build the comm, load the candidate, report "load", only
then receive the secret seed, then verify or benchmark. Messages go to the parent on a pipe of its own;
verification outputs go to files the parent judges (reference in float64, outside this process).
"""

from __future__ import annotations

import datetime
import os
import threading
import traceback
from pathlib import Path

from .env import force_multicast_off

PG_TIMEOUT_S = 120


def rank_main(rank: int, cfg: dict, pipes, seed_qs) -> None:
    # every rank gets every rank's write end (spawn passes them all): it keeps its own, so that a rank that
    # dies mid-message leaves its pipe with no writer and the parent's read ends (runner.py)
    out = pipes[rank]
    for other in pipes:
        if other is not out:
            other.close()
    force_multicast_off(os.environ)
    # local: torch loads only after force_multicast_off has set this process's environment
    import torch
    import torch.distributed as dist

    world = cfg["world_size"]
    device = cfg["device"]

    def send(**msg):
        out.send(dict(msg, rank=rank))

    send(type="env", env={k: os.environ.get(k) for k in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
                                                          "NVSHMEM_DISABLE_NVLS")}, pid=os.getpid())
    try:
        if device == "cuda":
            torch.cuda.set_device(rank)
        else:
            # local: only a CPU rank patches Triton's interpreter
            from ..pipeline import interpreter_fix
            interpreter_fix.install()
        dist.init_process_group("nccl" if device == "cuda" else "gloo", init_method=f"file://{cfg['rendezvous']}",
                                rank=rank, world_size=world, timeout=datetime.timedelta(seconds=PG_TIMEOUT_S),
                                **({"device_id": torch.device("cuda", rank)} if device == "cuda" else {}))
        # local: these import torch, which waits for force_multicast_off (see rank_main)
        from ..targets.allreduce import get_multi_process_target
        from .comm import Comm
        target = get_multi_process_target(cfg["target"])
        comm = Comm(rank=rank, world_size=world, group=dist.group.WORLD, device=device,
                    capacity_bytes=cfg["capacity_bytes"])
    except Exception:
        send(type="fatal", code="harness:rank_setup", message=traceback.format_exc()[-3000:])
        return
    try:
        _run(rank, cfg, target, comm, send, seed_qs[rank])
    finally:
        try:
            dist.destroy_process_group()
        except Exception:
            pass


def _run(rank, cfg, target, comm, send, seed_q) -> None:
    # local: child_run imports torch, which waits for force_multicast_off (see rank_main)
    from ..pipeline.child_run import Candidate, LaunchLog, load_module

    log = LaunchLog()
    if not cfg.get("use_default"):
        log.install(cute=False)
    try:
        if cfg.get("use_default"):  # the target's own default kernel (NCCL / gloo), verified like a candidate
            forward = target.baseline
        else:
            forward = getattr(load_module(cfg["candidate_path"], "ark_candidate"), "forward", None)
        if not callable(forward):
            send(type="load", status="fail", findings=[{"code": "verify:no_forward",
                                                        "message": "the module defines no callable forward"}])
            return
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            raise
        send(type="load", status="fail", findings=[{"code": "verify:import_error",
                                                    "message": traceback.format_exc()[-3000:]}])
        return
    send(type="load", status="pass")
    seed = int(seed_q.get())
    cand = Candidate(forward, list(cfg.get("kernels") or []), cfg.get("dsl") or "triton", cfg["device"], log,
                     threading.active_count)
    if cfg["mode"] == "verify":
        verify(cfg, target, cand, comm, seed, send)
    else:
        # local: only a benchmarking rank needs the timing code
        from .bench import benchmark
        incumbent = target.baseline
        if cfg.get("incumbent_path"):
            incumbent = load_module(cfg["incumbent_path"], "ark_incumbent").forward
        benchmark(cfg, target, forward, incumbent, target.baseline, comm, seed, send)
    send(type="done")


def agree(flag: bool, comm) -> bool:
    """True when every rank says True (the harness's own collective, outside the candidate's reach)."""
    # local: torch waits for force_multicast_off (see rank_main)
    import torch
    import torch.distributed as dist

    from .comm import _disable_current_modes
    with _disable_current_modes():
        t = torch.tensor([0 if flag else 1], dtype=torch.int32, device=comm.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=comm.group)
        return int(t.item()) == 0


def _call(cand, inputs, comm, variant: int, profile: bool = False) -> dict:
    # local: torch waits for force_multicast_off (see rank_main)
    import torch.distributed as dist
    comm.poison()
    if comm.device == "cuda":
        import torch  # local: torch waits for force_multicast_off (see rank_main)
        torch.cuda.synchronize()
    dist.barrier(group=comm.group)  # every rank's buffer is poisoned before any rank's kernel reads it
    return cand.call(tuple(inputs) + (comm,), variant, profile=profile)


def verify(cfg, target, cand, comm, seed: int, send) -> None:
    """The single-process verify (pipeline/verify_child.py) per rank: three calls per shape (fresh
    inputs, poisoned outputs and buffers; a second call must agree bitwise; inputs refreshed in place
    must give the new answer), structure and evidence checks, outputs saved for the parent."""
    # local: torch and the modules that import it wait for force_multicast_off (see rank_main)
    import torch

    from ..pipeline.protocol import derive_seed
    from ..pipeline.verify_child import _overlaps, _same_bits, _storages, evidence_findings, structure_findings
    from ..targets.base import as_outputs

    rank, device = comm.rank, comm.device
    outdir = Path(cfg["outputs_dir"])
    for i, shape in enumerate(cfg["shapes"]):
        msg = {"type": "verify_shape", "index": i, "shape": shape, "findings": []}
        findings = msg["findings"]
        try:
            inputs = target.rank_inputs(shape, derive_seed(seed, "verify", i, 0), rank, device)
            tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
            snapshot = [x.clone() for x in tensors]
            spec = target.output_spec(shape)
            first = _call(cand, inputs, comm, 0, profile=(device == "cuda"))
            outs1 = as_outputs(first["result"])
            msg.update(launches=sorted(set(first["launches"])), ops=first["ops"], kernels=first["kernels"])
            findings += structure_findings(outs1, spec, device, inputs)
            if not cfg.get("use_default"):
                findings += evidence_findings(first, cand)
            if any(comm.overlaps(t) for t in outs1):
                findings.append({"code": "verify:aliases_comm_buffer",
                                 "message": "an output shares memory with a staging buffer peers write into"})
            if not all(_same_bits(a, b) for a, b in zip(tensors, snapshot)):
                findings.append({"code": "verify:mutated_input", "message": "forward modified its inputs"})
                for x, s in zip(tensors, snapshot):
                    x.copy_(s)
            broken = any(f["code"] in ("verify:output_type", "verify:shape", "verify:dtype", "verify:device")
                         for f in findings)
            if not agree(not broken, comm):  # every rank stops here together, or none does
                msg["status"] = "ran" if broken else "stopped"
                send(**msg)
                continue
            second = _call(cand, inputs, comm, 1)
            outs2 = as_outputs(second["result"])
            if _overlaps(_storages(outs1), _storages(outs2)):
                findings.append({"code": "verify:reused_output",
                                 "message": "two calls returned the same output memory (a cached or static result)"})
            elif not all(_same_bits(a, b) for a, b in zip(outs1, outs2)):
                findings.append({"code": "verify:nondeterministic",
                                 "message": "two runs on the same inputs gave different results"})
            fresh = target.rank_inputs(shape, derive_seed(seed, "verify", i, 1), rank, device)
            for x, y in zip(inputs, fresh):
                if isinstance(x, torch.Tensor):
                    x.copy_(y)
            third = _call(cand, inputs, comm, 0)
            outs3 = as_outputs(third["result"])
            for f in structure_findings(outs3, spec, device, inputs):
                if f not in findings:
                    findings.append(f)
            files = [f"verify_{i}_r{rank}_a.pt", f"verify_{i}_r{rank}_c.pt"]
            for name, outs in zip(files, (outs1, outs3)):
                torch.save([t.detach().cpu() for t in outs], outdir / name)
            msg.update(status="ran", files=files)
        except Exception as e:
            msg["status"] = "error"
            text = str(e)
            code = ("verify:cuda_error" if "CUDA error" in text or "illegal memory" in text else
                    "verify:oom" if "out of memory" in text.lower() else "verify:exception")
            findings.append({"code": code, "message": traceback.format_exc()[-3000:]})
            send(**msg)
            return  # the other ranks may be inside a collective: the parent's timeout ends them
        send(**msg)
