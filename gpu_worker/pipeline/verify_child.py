"""The verify mode of the sandboxed child (docs/verification.md): per shape, call the candidate every way the
plan says (referee.RUNS), hold each call to the evidence rules below, and save its outputs for the referee.

child_run.py loads the candidate and wraps it (child_run.Candidate: one watched call); this module decides
what a call's record shows (the wrong structure, a torch fallback, no kernel of its own, a thread) and runs
the shapes. distributed/rank.py applies the same evidence rules per rank."""

from __future__ import annotations

import contextlib
import traceback
from pathlib import Path

import torch

from ..targets.base import as_outputs
from .protocol import candidate_text, derive_seed
from .referee import file_name, runs_for

# aten ops a candidate's forward may issue itself: allocation, layout and copies; the work is the kernel's.
# Not _local_scalar_dense: a tensor value read on the host (float(t), int(t)) feeds work done in Python.
ALLOWED_OPS = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "new_zeros", "full", "full_like", "new_full", "ones", "ones_like", "new_ones", "fill", "fill_", "zero_",
    "arange", "view", "_unsafe_view", "reshape", "_reshape_alias", "as_strided", "expand", "clone", "copy_",
    "_to_copy", "to", "detach", "alias", "lift_fresh", "t", "transpose", "permute", "unsqueeze", "squeeze",
    "select", "slice", "narrow", "unbind", "split", "resolve_conj", "resolve_neg", "set_",
    "is_same_size", "contiguous", "flatten", "view_as", "expand_as", "unflatten", "_to_dlpack", "_has_compatible_shallow_copy_type",
}
ALLOWED_KERNEL_WORDS = ("FillFunctor", "fill", "Memset", "memset", "Memcpy", "memcpy", "copy_kernel",
                        "direct_copy", "arange")


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


def evidence_findings(call: dict, cand) -> list[dict]:
    """What one call's record (child_run.Candidate.call or capture) shows against the candidate `cand`."""
    findings = list(call.get("tamper") or [])
    foreign_ops = sorted(op for op in call["ops"] if op not in ALLOWED_OPS)
    if foreign_ops:
        findings.append({"code": "verify:torch_fallback",
                         "message": f"forward ran torch ops that do the work outside the kernel: {', '.join(foreign_ops)}"})
    if "triton" in cand.dsl and not any(n in cand.own for n in call["launches"]):
        findings.append({"code": "verify:no_kernel_launch",
                         "message": "none of the candidate's @triton.jit kernels was launched"})
    if call["threads"] > 0:
        findings.append({"code": "verify:thread", "message": f"{call['threads']} new thread(s) after forward"})
    if call["kernels"] is not None:
        # Triton kernels carry their function's name; CuTe DSL mangles it, so any non-ATen kernel counts there
        own = [k for k in call["kernels"] if any(n in k for n in cand.own)
               or ("cute" in cand.dsl and "at::" not in k and not any(w in k for w in ALLOWED_KERNEL_WORDS))]
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

    def __init__(self, target, cand, shape, index: int, seed: int, outdir: Path, findings: list):
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
        tamper, inputs unchanged), so a fallback or a write into the caller's tensors on the n-th call or for
        new pointers is as visible as on the first. Changed inputs are restored for the runs that follow."""
        tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
        snapshot = [x.clone() for x in tensors]
        result = self.cand.call(inputs, variant, **kw)
        outs = as_outputs(result["result"])
        self.add(structure_findings(outs, self.spec, self.cand.device, inputs))
        self.add(evidence_findings(result, self.cand))
        if not all(_same_bits(a, b) for a, b in zip(tensors, snapshot)):
            self.add([{"code": "verify:mutated_input", "message": "forward modified its inputs"}])
            for x, s in zip(tensors, snapshot):
                x.copy_(s)
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
        # The inputs are written on the default stream and the outputs are saved from it: without these two
        # waits the side stream reads inputs still being written (an honest kernel then reads garbage and is
        # failed as mutating its inputs, seen on the H200) and the saved outputs may predate the call.
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            _, outs = self.call(inputs, 1)
        torch.cuda.current_stream().wait_stream(side)
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


def verify(cfg, out, target, cand, seed: int, perf) -> None:
    """Every shape of cfg["shapes"], in order, through `cand` (a child_run.Candidate); one verify_shape
    message per shape. Stops after a device fault or a broken capture, which leave the GPU unusable."""
    device = cand.device
    outdir = Path(cfg["outputs_dir"])
    graphs = device == "cuda"
    for i, shape in enumerate(cfg["shapes"]):
        t0 = perf()
        msg = {"type": "verify_shape", "index": i, "shape": shape, "findings": []}
        findings = msg["findings"]
        runs = {r.tag for r in runs_for(i, device, target.first_call_only(shape, device))}
        try:
            sr = ShapeRun(target, cand, shape, i, seed, outdir, findings)
            inputs = sr.inputs(0)
            if device == "cpu" and "cute" in cand.dsl:
                try:
                    cand.call(inputs, 0)
                except Exception:
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
            if sr.broken():
                msg["status"] = "ran"
                msg["seconds"] = perf() - t0
                out.send(**msg)
                continue
            sr.save("first", outs1)

            if "moved" in runs:  # the same values at new addresses: a result tied to a pointer, or nondeterminism
                _, outs2 = sr.call(_moved(inputs), 1)
                if _overlaps(_storages(outs1), _storages(outs2)):
                    findings.append({"code": "verify:reused_output", "message": "two calls returned the same "
                                     "output memory (a cached or static result)"})
                elif not sr.broken() and not all(
                        _same_bits(a, b) for a, b in zip(target.canonical(outs1[0] if len(outs1) == 1 else outs1),
                                                         target.canonical(outs2[0] if len(outs2) == 1 else outs2))):
                    findings.append({"code": "verify:nondeterministic",
                                     "message": "two runs on the same inputs gave different results"})
                sr.save("moved", outs2)

            if "refresh" in runs:  # same memory, new contents: a result cached by pointer or shape is now stale
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
