"""Inside the sandboxed child (started by child.py): load the candidate, watch its calls, run one mode.

`run` loads the candidate and hands it to the mode the config names: verify (verify_child.py), bench
(bench_child.py), retime (retime_child.py) or e2e (the e2e gate). `Candidate` is the candidate under watch:
each call poisons fresh allocations, records the aten ops and the kernels it launched, and checks what it
may have tampered with; verify_child.py judges that record."""

from __future__ import annotations

import importlib.util
import sys
import traceback
from collections import Counter
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..targets import get_target
from . import tamper
from .protocol import candidate_text
from .verify_child import verify

EMPTY_OPS = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}
INT_POISON = (0x7F7F7F7F, -0x12345679)  # both invalid as indices, and not the pad value -1


def poison_fill(t: torch.Tensor, variant: int) -> None:
    if t.numel() == 0:
        return
    if t.is_floating_point() or t.is_complex():
        t.fill_(float("nan"))
    elif t.dtype == torch.bool:
        t.fill_(True)
    else:
        info = torch.iinfo(t.dtype)
        t.fill_(max(info.min, min(info.max, INT_POISON[variant % 2])))


class OpRecorder(TorchDispatchMode):
    """Records the aten ops the candidate's forward issues and poisons every uninitialised allocation."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch's switch: no torch._dynamo import on the first op, a CPU-second per child (docs/harness.md,
        # "The op recorder keeps its dispatch method as written")
        return False

    def __init__(self, variant: int):
        super().__init__()
        self.ops: Counter = Counter()
        self.variant = variant

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        self.ops[name] += 1
        if name in EMPTY_OPS and isinstance(result, torch.Tensor):
            poison_fill(result, self.variant)
        return result


class LaunchLog:
    """Which of the candidate's @triton.jit functions launched, and how many CuTe compiles succeeded."""

    def __init__(self):
        self.names: list[str] = []
        self.cute_compiles = 0
        self.cute_compiles_total = 0  # a compile cache in the candidate may skip compiling for a later shape
        self.recording = False

    def install(self, cute: bool) -> None:
        log = self
        classes = []
        # local: the launch log patches Triton only in the child that runs a candidate
        from triton.runtime import jit as tjit
        classes.append(tjit.JITFunction)
        try:
            from triton.runtime.interpreter import InterpretedFunction  # local: as above; older Tritons lack it
            classes.append(InterpretedFunction)
        except ImportError:
            pass
        for cls in classes:
            original = cls.run

            def run(self, *args, _original=original, **kwargs):
                if log.recording and not kwargs.get("warmup", False):
                    log.names.append(getattr(self.fn, "__name__", "?"))
                return _original(self, *args, **kwargs)

            cls.run = run
        if not cute:
            return
        try:
            # local: CuTe DSL is optional; only a CuTe candidate needs it
            import cutlass.cute as cute
        except Exception:
            return
        compile_ = cute.compile

        class _Compile:
            def __call__(self, *args, **kwargs):
                result = compile_(*args, **kwargs)
                log.cute_compiles += 1
                log.cute_compiles_total += 1
                return result

            def __getitem__(self, item):
                inner = compile_[item]

                def call(*args, **kwargs):
                    result = inner(*args, **kwargs)
                    log.cute_compiles += 1
                    log.cute_compiles_total += 1
                    return result
                return call

        cute.compile = _Compile()


# The kernel DSLs a candidate may import (the guard admits no other third-party root). One this worker cannot
# import is the worker's gap, not the candidate's fault: its evaluation ends as a harness error, never as a
# failed verification (a false rejection). The root must be truly absent: a candidate that raises the error
# itself, or imports a submodule that does not exist, still fails as its own import error.
DSL_PACKAGES = {"cutlass": "nvidia-cutlass-dsl (the `cute` extra)", "triton": "triton"}


def missing_dsl(exc: BaseException) -> str | None:
    """The message for a candidate whose DSL package is not installed on this worker, else None."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    root = exc.name.split(".")[0]
    if root not in DSL_PACKAGES or importlib.util.find_spec(root) is not None:
        return None
    return (f"this worker cannot import {root!r}: it needs {DSL_PACKAGES[root]} installed in the interpreter's own "
            f"site-packages (a sandboxed child's PYTHONPATH is the repository only) to judge this candidate")


def load_module(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def poison_cuda_allocator(variant: int) -> None:
    """Fill the caching allocator's free memory with poison, so torch.empty never returns old answers."""
    free, _ = torch.cuda.mem_get_info()
    big = torch.empty(min(free // 4, 1 << 30), dtype=torch.uint8, device="cuda")
    smalls = [torch.empty(1 << 19, dtype=torch.uint8, device="cuda") for _ in range(32)]
    for t in [big] + smalls:
        t.fill_(0xFF if variant % 2 == 0 else 0x7F)
    del big, smalls


class Candidate:
    def __init__(self, forward, own: list[str], dsl: str | None, device: str, log: LaunchLog, active_threads):
        # dsl: "triton", "cute", "triton+cute", or None where the guard found none (a guard-less test run)
        self.forward, self.own, self.dsl, self.device, self.log = forward, own, dsl or "", device, log
        self.active_threads = active_threads

    def call(self, inputs, variant: int, profile: bool = False) -> dict:
        threads_before = self.active_threads()
        if self.device == "cuda":
            poison_cuda_allocator(variant)
            torch.cuda.synchronize()
        self.log.names.clear()
        self.log.cute_compiles = 0
        rec = OpRecorder(variant)
        prof = None
        kernels = None
        self.log.recording = True
        try:
            if profile:
                try:
                    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                              torch.profiler.ProfilerActivity.CUDA])
                    prof.__enter__()
                except Exception:
                    prof = None
            try:
                with rec:
                    result = self.forward(*inputs)
                if self.device == "cuda":
                    torch.cuda.synchronize()
            finally:
                if prof is not None:
                    prof.__exit__(None, None, None)
        finally:
            self.log.recording = False
        if prof is not None:
            try:
                kernels = sorted({e.name for e in prof.events()
                                  if e.device_type == torch.autograd.DeviceType.CUDA})
            except Exception:
                kernels = None
            # the poison fill of every output launches a kernel: an empty trace means no CUPTI access
            # (e.g. profiling restricted to admin users), not evidence of absence
            kernels = kernels or None
        return {"result": result, "launches": list(self.log.names), "ops": dict(rec.ops), "kernels": kernels,
                "threads": self.active_threads() - threads_before, "cute_compiles": self.log.cute_compiles,
                "tamper": tamper_findings()}

    def capture(self, inputs, graph, stream) -> dict:
        """Capture one call in `graph` on `stream`, as the benchmark does; the ops and launches it issues
        are recorded as for a plain call (a torch fallback only under capture is still one)."""
        threads_before = self.active_threads()
        self.log.names.clear()
        rec = OpRecorder(0)
        self.log.recording = True
        try:
            with torch.cuda.graph(graph, stream=stream), rec:  # the recorder sees the candidate's ops only
                result = self.forward(*inputs)
        finally:
            self.log.recording = False
        return {"result": result, "launches": list(self.log.names), "ops": dict(rec.ops), "kernels": None,
                "threads": self.active_threads() - threads_before, "tamper": tamper_findings()}


def tamper_findings() -> list[dict]:
    """After every candidate call: did it change anything the harness relies on (pipeline/tamper.py,
    armed by child.py before the candidate is imported)."""
    return list(tamper.check())


def run(cfg: dict, out, *, perf, active_threads) -> None:
    target = get_target(cfg["target"], cfg.get("target_document"))
    device = cfg["device"]
    if device == "cpu":
        # local: only a CPU child patches Triton's interpreter
        from . import interpreter_fix
        interpreter_fix.install()
    if cfg["mode"] == "e2e":
        from ..e2e import run_gate  # the e2e engineer's gate, run here so the candidate stays sandboxed
        inc = cfg.get("incumbent_path")
        stage = run_gate(target=cfg["target"], candidate_source=Path(cfg["candidate_path"]).read_text(),
                         incumbent_source=Path(inc).read_text() if inc else None, profile=cfg["profile"],
                         routes=cfg.get("routes"))
        out.send(type="e2e", stage=stage)
        out.send(type="done")
        return
    log = LaunchLog()
    log.install(cute="cute" in (cfg.get("dsl") or ""))
    try:
        module = load_module(cfg["candidate_path"], "ark_candidate")
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            raise
        missing = missing_dsl(e)
        finding = ({"code": "harness:missing_dsl", "message": missing} if missing else
                   {"code": "verify:import_error", "message": candidate_text(traceback.format_exc())})
        out.send(type="load", status="fail", findings=[finding])
        return
    forward = getattr(module, "forward", None)
    if not callable(forward):
        out.send(type="load", status="fail", findings=[{"code": "verify:no_forward",
                                                        "message": "the module defines no callable forward"}])
        return
    own = list(cfg.get("kernels") or [])
    out.send(type="load", status="pass", own_kernels=own)
    if cfg["mode"] == "bench":
        # local: only a benchmarking child needs the timing code
        from .bench_child import benchmark, warm_up
        incumbent = target.baseline
        if cfg.get("incumbent_path"):
            incumbent = load_module(cfg["incumbent_path"], "ark_incumbent").forward
        if device == "cuda":
            # the raw forwards, not Candidate.call: the launch log is not recording, nothing is judged
            t0 = perf()
            warm_up(target, cfg["shapes"], forward, incumbent, target.baseline)
            out.send(type="warm", seconds=perf() - t0)
    secret = sys.stdin.readline()
    seed = int(secret.strip() or "0")
    if cfg["mode"] == "ncu":  # counters under Nsight Compute, never scored (pipeline/ncu.py)
        from .ncu import profiled_call  # local: only a profiling child needs it
        profiled_call(cfg, out, target, forward, seed)
        out.send(type="done")
        return
    if cfg["mode"] == "retime":  # numbers only, the loop judges them (docs/isolation.md, Independent re-timing)
        from .retime_child import retime_in_child  # local: only a re-timing child needs it
        retime_in_child(cfg, out, target, forward, seed, perf)
        out.send(type="done")
        return
    cand = Candidate(forward, own, cfg.get("dsl", "triton"), device, log, active_threads)
    if cfg["mode"] == "verify":
        verify(cfg, out, target, cand, seed, perf)
    else:
        benchmark(cfg, out, target, forward, incumbent, target.baseline, seed, perf)
    out.send(type="done")
