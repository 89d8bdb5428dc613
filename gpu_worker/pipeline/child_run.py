"""Inside the sandboxed child: load the candidate, then verify (run and save outputs) or benchmark."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import traceback
from collections import Counter
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..targets import get_target
from ..targets.base import as_outputs
from .protocol import candidate_text, derive_seed
from . import tamper
from .referee import file_name, runs_for

# aten ops a candidate's forward may issue itself: allocation, layout and copies; the work is the kernel's.
ALLOWED_OPS = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "new_zeros", "full", "full_like", "new_full", "ones", "ones_like", "new_ones", "fill", "fill_", "zero_",
    "arange", "view", "_unsafe_view", "reshape", "_reshape_alias", "as_strided", "expand", "clone", "copy_",
    "_to_copy", "to", "detach", "alias", "lift_fresh", "t", "transpose", "permute", "unsqueeze", "squeeze",
    "select", "slice", "narrow", "unbind", "split", "resolve_conj", "resolve_neg", "set_", "_local_scalar_dense",
    "is_same_size", "contiguous", "flatten", "view_as", "expand_as", "unflatten", "_to_dlpack", "_has_compatible_shallow_copy_type",
}
EMPTY_OPS = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}
INT_POISON = (0x7F7F7F7F, -0x12345679)  # both invalid as indices, and not the pad value -1
ALLOWED_KERNEL_WORDS = ("FillFunctor", "fill", "Memset", "memset", "Memcpy", "memcpy", "copy_kernel",
                        "direct_copy", "arange")


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


def load_module(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _storages(tensors) -> list[tuple[int, int]]:
    spans = []
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.numel():
            s = t.untyped_storage()
            spans.append((s.data_ptr(), s.data_ptr() + s.nbytes()))
    return spans


def _overlaps(a, b) -> bool:
    return any(x0 < y1 and y0 < x1 for x0, x1 in a for y0, y1 in b)


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return bool(torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8)))


def structure_findings(outputs, spec, device: str, inputs) -> list[dict]:
    findings = []
    if len(outputs) != len(spec):
        return [{"code": "verify:output_type", "message": f"{len(outputs)} outputs, expected {len(spec)}"}]
    for i, (t, (shape, dtype)) in enumerate(zip(outputs, spec)):
        if type(t) is not torch.Tensor:
            findings.append({"code": "verify:output_type",
                             "message": f"output {i} is {type(t).__module__}.{type(t).__name__}, not a plain torch.Tensor"})
            continue
        if t.dtype != dtype:
            findings.append({"code": "verify:dtype", "message": f"output {i}: {t.dtype}, expected {dtype}"})
        if tuple(t.shape) != tuple(shape):
            findings.append({"code": "verify:shape", "message": f"output {i}: shape {tuple(t.shape)}, expected {tuple(shape)}"})
        if t.device.type != device:
            findings.append({"code": "verify:device", "message": f"output {i} on {t.device}, expected {device}"})
    plain = [t for t in outputs if type(t) is torch.Tensor]
    if _overlaps(_storages(plain), _storages([x for x in inputs if isinstance(x, torch.Tensor)])):
        findings.append({"code": "verify:aliases_input", "message": "an output shares memory with an input"})
    return findings


def poison_cuda_allocator(variant: int) -> None:
    """Fill the caching allocator's free memory with poison, so torch.empty never returns old answers."""
    free, _ = torch.cuda.mem_get_info()
    big = torch.empty(min(free // 4, 1 << 30), dtype=torch.uint8, device="cuda")
    smalls = [torch.empty(1 << 19, dtype=torch.uint8, device="cuda") for _ in range(32)]
    for t in [big] + smalls:
        t.fill_(0xFF if variant % 2 == 0 else 0x7F)
    del big, smalls


class Candidate:
    def __init__(self, forward, own: list[str], dsl: str, device: str, log: LaunchLog, active_threads):
        self.forward, self.own, self.dsl, self.device, self.log = forward, own, dsl, device, log
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


def evidence_findings(call: dict, cand: Candidate) -> list[dict]:
    findings = list(call.get("tamper") or [])
    foreign_ops = sorted(op for op in call["ops"] if op not in ALLOWED_OPS)
    if foreign_ops:
        findings.append({"code": "verify:torch_fallback",
                         "message": f"forward ran torch ops that do the work outside the kernel: {', '.join(foreign_ops)}"})
    if cand.dsl == "triton" and not any(n in cand.own for n in call["launches"]):
        findings.append({"code": "verify:no_kernel_launch",
                         "message": "none of the candidate's @triton.jit kernels was launched"})
    if call["threads"] > 0:
        findings.append({"code": "verify:thread", "message": f"{call['threads']} new thread(s) after forward"})
    if call["kernels"] is not None:
        # Triton kernels carry their function's name; CuTe DSL mangles it, so any non-ATen kernel counts there
        own = [k for k in call["kernels"] if any(n in k for n in cand.own)
               or (cand.dsl == "cute" and "at::" not in k and not any(w in k for w in ALLOWED_KERNEL_WORDS))]
        foreign = [k for k in call["kernels"] if k not in own and not any(w in k for w in ALLOWED_KERNEL_WORDS)]
        if not own:
            findings.append({"code": "verify:no_kernel_evidence",
                             "message": f"the profiler saw none of the candidate's kernels ({', '.join(cand.own)}) run"})
        if foreign:
            findings.append({"code": "verify:torch_fallback",
                             "message": f"foreign GPU kernels ran: {', '.join(foreign[:5])}"})
    return findings


def _save(path: Path, outputs) -> None:
    torch.save([t.detach().cpu() for t in outputs], path)


def _moved(inputs) -> tuple:
    """The same values in newly allocated tensors: new pointers while the old ones are still alive."""
    return tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in inputs)


def _refill(inputs, fresh) -> None:
    for x, y in zip(inputs, fresh):
        if isinstance(x, torch.Tensor):
            x.copy_(y)


def burst_length(seed: int) -> int:
    """Extra calls before the "later" run: 4 to 16, drawn from the secret, so a count is not a signal."""
    return 4 + derive_seed(seed, "burst") % 13


STRUCTURAL = ("verify:output_type", "verify:shape", "verify:dtype", "verify:device")


class ShapeRun:
    """One shape's runs (referee.RUNS): calls the candidate, keeps every finding once, saves outputs."""

    def __init__(self, target, cand: Candidate, shape, index: int, seed: int, outdir: Path, findings: list):
        self.target, self.cand, self.shape, self.index, self.seed = target, cand, shape, index, seed
        self.outdir, self.findings, self.files = outdir, findings, []
        self.spec = target.output_spec(shape)

    def inputs(self, input_set: int) -> tuple:
        return self.target.make_inputs(self.shape, derive_seed(self.seed, "verify", self.index, input_set),
                                       self.cand.device)

    def add(self, findings) -> None:
        for f in findings:
            if f not in self.findings:
                self.findings.append(f)

    def call(self, inputs, variant: int, **kw) -> tuple[dict, list]:
        """One call; every call is held to the same evidence (own kernel, no torch work, no thread, no
        tamper), so a fallback on the n-th call or for new pointers is as visible as on the first."""
        result = self.cand.call(inputs, variant, **kw)
        outs = as_outputs(result["result"])
        self.add(structure_findings(outs, self.spec, self.cand.device, inputs))
        self.add(evidence_findings(result, self.cand))
        return result, outs

    def save(self, tag: str, outs) -> None:
        name = file_name(self.index, tag)
        _save(self.outdir / name, outs)
        self.files.append(name)

    def broken(self) -> bool:
        return any(f["code"] in STRUCTURAL for f in self.findings)

    def graph_runs(self) -> bool:
        """On a GPU, run the candidate as the benchmark does: on a side stream, then captured in a CUDA
        graph and replayed, once on the captured values (the first call's) and once after new values
        were copied into the captured input tensors. False when the capture broke (later shapes then
        skip it)."""
        side = torch.cuda.Stream()
        inputs = self.inputs(0)  # the first call's values, in new tensors: only the stream differs
        with torch.cuda.stream(side):
            _, outs = self.call(inputs, 1)
        if self.broken():
            return True
        self.save("stream", outs)
        graph = torch.cuda.CUDAGraph()
        try:
            captured = self.cand.capture(inputs, graph, side)
        except Exception:
            with contextlib.suppress(Exception):
                torch.cuda.synchronize()
            self.add([{"code": "verify:graph_capture",
                       "message": "the call failed while captured in a CUDA graph on a side stream, as the "
                                  f"benchmark runs it:\n{candidate_text(traceback.format_exc())}"}])
            return False
        outs = as_outputs(captured["result"])
        self.add(structure_findings(outs, self.spec, "cuda", inputs))
        self.add(evidence_findings(captured, self.cand))
        if self.broken():
            return True
        for tag, fresh in (("replay", None), ("replay_fresh", self.inputs(3))):
            side.wait_stream(torch.cuda.current_stream())  # the fresh values are made on the default stream
            with torch.cuda.stream(side):
                if fresh is not None:
                    _refill(inputs, fresh)
                graph.replay()
            side.synchronize()
            self.save(tag, outs)
        del graph
        return True


def verify(cfg, out, target, cand: Candidate, seed: int, perf) -> None:
    device = cand.device
    outdir = Path(cfg["outputs_dir"])
    graphs = device == "cuda"
    for i, shape in enumerate(cfg["shapes"]):
        t0 = perf()
        msg = {"type": "verify_shape", "index": i, "shape": shape, "findings": []}
        findings = msg["findings"]
        runs = {r.tag for r in runs_for(i, device)}
        try:
            sr = ShapeRun(target, cand, shape, i, seed, outdir, findings)
            inputs = sr.inputs(0)
            tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
            snapshot = [x.clone() for x in tensors]
            if device == "cpu" and cand.dsl == "cute":
                try:
                    cand.call(inputs, 0)
                except Exception as e:
                    compiled = cand.log.cute_compiles_total
                    msg["status"] = "compile_only" if compiled else "error"
                    if not compiled:
                        findings.append({"code": "verify:compile_error",
                                         "message": candidate_text(traceback.format_exc())})
                else:
                    msg["status"] = "error"
                    findings.append({"code": "verify:no_kernel_launch",
                                     "message": "a CuTe candidate returned on a CPU host: it cannot have launched"})
                msg["seconds"] = perf() - t0
                out.send(**msg)
                continue

            first, outs1 = sr.call(inputs, 0, profile=(device == "cuda"))
            msg.update(launches=sorted(set(first["launches"])), ops=first["ops"], kernels=first["kernels"])
            if not all(_same_bits(a, b) for a, b in zip(tensors, snapshot)):
                findings.append({"code": "verify:mutated_input", "message": "forward modified its inputs"})
                for x, s in zip(tensors, snapshot):
                    x.copy_(s)
            if sr.broken():
                msg["status"] = "ran"
                msg["seconds"] = perf() - t0
                out.send(**msg)
                continue
            sr.save("first", outs1)

            # the same values at new addresses: a result tied to a pointer, or nondeterminism, shows here
            _, outs2 = sr.call(_moved(inputs), 1)
            if _overlaps(_storages(outs1), _storages(outs2)):
                findings.append({"code": "verify:reused_output",
                                 "message": "two calls returned the same output memory (a cached or static result)"})
            elif not sr.broken() and not all(
                    _same_bits(a, b) for a, b in zip(target.canonical(outs1[0] if len(outs1) == 1 else outs1),
                                                     target.canonical(outs2[0] if len(outs2) == 1 else outs2))):
                findings.append({"code": "verify:nondeterministic",
                                 "message": "two runs on the same inputs gave different results"})
            sr.save("moved", outs2)

            # same memory, new contents: a result cached by pointer or shape is now stale
            _refill(inputs, sr.inputs(1))
            _, outs3 = sr.call(inputs, 0)
            sr.save("refresh", outs3)

            if "later" in runs:  # the n-th call: a burst on fresh inputs, then one the referee judges
                for j in range(burst_length(seed)):
                    sr.call(sr.inputs(100 + j), j % 2)
                _, outs4 = sr.call(sr.inputs(2), 0)
                sr.save("later", outs4)
            if graphs and "stream" in runs:
                graphs = sr.graph_runs()
            msg.update(status="ran", files=sr.files)
        except torch.OutOfMemoryError as e:
            msg["status"] = "error"
            findings.append({"code": "verify:oom", "message": candidate_text(e)})
        except Exception as e:
            msg["status"] = "error"
            text = candidate_text(traceback.format_exc())
            text_e = str(e)
            code = ("verify:cuda_error" if "CUDA error" in text_e or "illegal memory" in text_e else
                    "verify:oom" if "can't allocate memory" in text_e or "out of memory" in text_e.lower() else
                    "verify:exception")
            findings.append({"code": code, "message": text})
        msg["seconds"] = perf() - t0
        out.send(**msg)
        if msg["status"] == "error" and any(f["code"] == "verify:cuda_error" for f in findings):
            return  # the CUDA context is unusable after a device fault
        if any(f.get("code") == "verify:graph_capture" for f in msg.get("findings") or findings):
            return  # a broken capture can leave the stream unusable: the next call hung on an H200 until timeout


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
                         incumbent_source=Path(inc).read_text() if inc else None, profile=cfg["profile"])
        out.send(type="e2e", stage=stage)
        out.send(type="done")
        return
    log = LaunchLog()
    log.install(cute=cfg.get("dsl") == "cute")
    try:
        module = load_module(cfg["candidate_path"], "ark_candidate")
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            raise
        out.send(type="load", status="fail", findings=[{"code": "verify:import_error",
                                                        "message": candidate_text(traceback.format_exc())}])
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
