"""Tamper checks: did a candidate call change anything the child's harness relies on?

`arm()` runs in the sandboxed child after the harness modules are imported and before the candidate
is: it remembers the identity of every object the report depends on (the writer and the pipe it
writes to, the CUDA events, graphs and synchronisation calls the benchmark times with, the clocks,
the op recorder, the builtins, the harness's own modules and their contents). `check()` runs after
every candidate call and returns one `guard:tamper` finding per thing that is no longer what it was,
plus `guard:thread` for any Python thread the candidate's code started. The messages are written
here and name only the harness object, never anything the candidate wrote.

This is a tripwire behind the guard, not a wall: code that can run anything in this process could
also disarm it. The guard (pipeline/guard.py) is what keeps candidate code from reaching these
objects at all, and the parent judges outputs and times itself (docs/isolation.md says how the
layers fit together).
"""

from __future__ import annotations

import builtins
import os
import stat
import sys
import threading
import warnings
# The builtins this module calls, bound as its own globals: a candidate that rebinds or deletes one in
# the builtins module must not blind (or crash) the check that reports it.
from builtins import (AttributeError, Exception, OSError, any, bool, dict, getattr, isinstance, len, list, set,
                      sorted, str, tuple, type, vars)

import _thread

CODE = "guard:tamper"
THREAD_CODE = "guard:thread"
# Modules whose sys.modules entry must stay the same object: replacing one swaps the code the harness calls.
WATCHED_MODULE_PREFIXES = ("gpu_worker", "torch", "torch.cuda", "triton", "triton.language", "cutlass")
WATCHED_MODULES = ("time", "os", "posix", "sys", "builtins", "threading", "_thread", "json", "resource",
                   "hashlib", "traceback", "contextlib", "math", "statistics", "random")
# Harness modules whose every module-level name (and the methods of classes defined there) is watched.
HARNESS_MODULES = ("gpu_worker.pipeline.protocol", "gpu_worker.pipeline.child_run", "gpu_worker.pipeline.bench_child",
                   "gpu_worker.pipeline.referee", "gpu_worker.pipeline.stats", "gpu_worker.pipeline.tamper",
                   "gpu_worker.pipeline.child", "gpu_worker.pipeline.retime_child",
                   "gpu_worker.pipeline.verify_child")
# Single attributes outside the harness that timing, reporting or judging goes through: "module:attr.path".
WATCHED_ATTRIBUTES = (
    "os:write", "os:read", "os:fstat", "os:_exit", "os:getpid", "json:dumps", "json:loads",
    "time:perf_counter", "time:perf_counter_ns", "time:monotonic", "time:monotonic_ns", "time:time",
    "time:time_ns", "time:process_time", "time:sleep",
    "threading:active_count", "threading:enumerate", "threading:Thread.start", "threading:_start_new_thread",
    "_thread:start_new_thread",
    "torch:save", "torch:equal", "torch:empty", "torch:Tensor.clone", "torch:Tensor.copy_", "torch:Tensor.cpu",
    "torch:Tensor.detach", "torch:Tensor.contiguous", "torch:Tensor.view", "torch:Tensor.fill_",
    "torch:Tensor.numpy", "torch:Tensor.data_ptr", "torch:Tensor.untyped_storage",
    "torch.cuda:synchronize", "torch.cuda:current_stream", "torch.cuda:stream", "torch.cuda:graph",
    "torch.cuda:Stream", "torch.cuda:Stream.synchronize", "torch.cuda:Stream.wait_stream",
    "torch.cuda:Event", "torch.cuda:Event.record", "torch.cuda:Event.elapsed_time", "torch.cuda:Event.synchronize",
    "torch.cuda:Event.query", "torch.cuda:CUDAGraph", "torch.cuda:CUDAGraph.replay",
    "torch.cuda:CUDAGraph.capture_begin", "torch.cuda:CUDAGraph.capture_end", "torch.cuda:mem_get_info",
    "torch.cuda:_sleep", "gc:disable", "gc:enable",
    "torch.profiler:profile", "torch.utils._python_dispatch:TorchDispatchMode.__enter__",
    "torch.utils._python_dispatch:TorchDispatchMode.__exit__",
    # not Triton's JITFunction.run: the launch log (child_run.LaunchLog) wraps it after arm(), on purpose
)
# Process-wide options that the other kernels of this child (the incumbent, its A/A copy, the default)
# compile or run under: Triton's knobs (every group: debug mode, compile flags, hooks), the environment
# variables Triton, torch and the math libraries read them from, and torch's numerics flags. A candidate that
# changed one would change the kernels it is compared with (docs/benchmark.md, "Traps").
WATCHED_ENV_PREFIXES = ("TRITON_", "CUTE_DSL_", "TORCH", "PYTORCH_", "CUBLAS", "CUDNN", "NVIDIA_TF32",
                        "CUDA_LAUNCH_BLOCKING", "CUDA_DEVICE_MAX_CONNECTIONS", "OMP_", "MKL_")
TORCH_OPTIONS = ("torch:get_float32_matmul_precision()", "torch:are_deterministic_algorithms_enabled()",
                 "torch:get_default_dtype()", "torch:get_num_threads()",
                 "torch.backends.cuda:matmul.allow_tf32",
                 "torch.backends.cuda:matmul.allow_fp16_reduced_precision_reduction",
                 "torch.backends.cuda:matmul.allow_bf16_reduced_precision_reduction",
                 "torch.backends.cudnn:enabled", "torch.backends.cudnn:benchmark", "torch.backends.cudnn:deterministic",
                 "torch.backends.cudnn:allow_tf32")
IGNORED_BUILTINS = {"_"}  # the interactive interpreter's last value, never read by the harness

_state: dict | None = None
_foreign_starts: list[str] = []  # threads the candidate's code started since arm()


def _resolve(spec: str):
    """(holder, name, value) for 'module:Attr.path', or None when it does not exist on this host."""
    module_name, _, path = spec.partition(":")
    holder = sys.modules.get(module_name)
    if holder is None:
        return None
    parts = path.split(".")
    for part in parts[:-1]:
        holder = getattr(holder, part, None)
        if holder is None:
            return None
    try:
        return holder, parts[-1], getattr(holder, parts[-1])
    except AttributeError:
        return None


def _same(a, b) -> bool:
    if a is b:
        return True
    try:  # a method fetched from a class twice can be two equal objects
        return type(a) is type(b) and bool(a == b)
    except Exception:
        return False


def _fd_identity(fd: int):
    try:
        st = os.fstat(fd)
    except OSError as e:
        return ("closed", e.errno)
    return (st.st_dev, st.st_ino, stat.S_IFMT(st.st_mode))


def _option(spec: str):
    """The value of one TORCH_OPTIONS entry ('module:attr.path' or 'module:function()'), _MISSING if absent."""
    found = _resolve(spec.removesuffix("()"))
    value = _MISSING if found is None else found[2]
    if spec.endswith("()") and value is not _MISSING:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                value = value()
        except Exception:
            value = _MISSING
    return value


def _process_options() -> dict[str, object]:
    """Name -> value of every process-wide option the compared kernels depend on (see TORCH_OPTIONS)."""
    out = {f"the environment variable {k}": v for k, v in os.environ.items() if k.startswith(WATCHED_ENV_PREFIXES)}
    knobs = sys.modules.get("triton.knobs")
    base = getattr(knobs, "base_knobs", None)
    for group_name, group in sorted(vars(knobs).items()) if isinstance(base, type) else ():
        if not isinstance(group, base):
            continue
        for name in sorted(set(dir(type(group))) | set(vars(group))):
            if name.startswith("_"):
                continue
            try:
                value = getattr(group, name)
            except Exception:
                continue
            calls = getattr(value, "calls", None)  # a HookChain: the hooks it holds
            out[f"triton.knobs.{group_name}.{name}"] = tuple(calls) if isinstance(calls, list) else value
    for spec in TORCH_OPTIONS:
        out[spec.replace(":", ".")] = _option(spec)
    return out


def _members(module) -> dict[str, object]:
    """Module-level names of a harness module, plus Class.method for classes defined in it."""
    out = {}
    for name, value in list(vars(module).items()):
        out[name] = value
        if isinstance(value, type) and value.__module__ == module.__name__:
            for attr, member in list(vars(value).items()):
                if not (attr.startswith("__") and attr not in ("__init__", "__call__", "__enter__", "__exit__",
                                                               "__torch_dispatch__")):
                    out[f"{name}.{attr}"] = member
    return out


def _class_member(module, dotted: str):
    holder = module
    for part in dotted.split("."):
        if part not in vars(holder):
            return _MISSING
        holder = vars(holder)[part]
    return holder


_MISSING = object()


def _candidate_on_stack(frame) -> bool:
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name.startswith("ark_candidate") or name.startswith("ark_incumbent"):
            return True
        frame = frame.f_back
    return False


def _watch_thread_starts() -> None:
    """Wrap the one function every Python thread starts through, so a start from the candidate's code
    (its module on the stack) is counted even when the thread ends before check() looks."""
    original = _thread.start_new_thread

    def start_new_thread(function, args, kwargs=None, _original=original):
        frame = sys._getframe(1)
        if _candidate_on_stack(frame):
            _foreign_starts.append(getattr(function, "__qualname__", "a function"))
        if kwargs is None:
            return _original(function, args)
        return _original(function, args, kwargs)

    _thread.start_new_thread = start_new_thread
    _thread.start_new = start_new_thread
    if getattr(threading, "_start_new_thread", None) is original:
        threading._start_new_thread = start_new_thread


def arm(*, writer=None, result_fd: int | None = None, extra_modules: tuple[str, ...] = ()) -> None:
    """Remember what the harness relies on. Call once, in the child, before the candidate is imported."""
    global _state
    # local: taken when armed, so what it records is the module as the candidate will find it
    import importlib

    for name in HARNESS_MODULES + tuple(extra_modules) + ("triton.knobs",):
        try:  # bench_child is imported lazily by the harness; arm sees it now, before the candidate can
            # (and Triton's options: a candidate's `import triton` must not look like options added)
            importlib.import_module(name)
        except Exception:
            pass
    _watch_thread_starts()
    _foreign_starts.clear()
    modules = {name: mod for name, mod in sys.modules.items()
               if name in WATCHED_MODULES or any(name == p or name.startswith(p + ".") for p in WATCHED_MODULE_PREFIXES)}
    attributes = {}
    for spec in WATCHED_ATTRIBUTES:
        found = _resolve(spec)
        if found is not None:
            attributes[spec] = found
    _state = {
        "builtins": {k: v for k, v in vars(builtins).items() if k not in IGNORED_BUILTINS},
        "modules": modules,
        "attributes": attributes,
        "harness": {},
        "writer": (writer, type(writer), dict(vars(writer))) if writer is not None else None,
        "fd": (result_fd, _fd_identity(result_fd)) if result_fd is not None else None,
        "options": _process_options(),
    }
    # taken last, so that this module's own _state is already the dict it will stay
    _state["harness"] = {name: _members(sys.modules[name]) for name in HARNESS_MODULES + tuple(extra_modules)
                         if name in sys.modules}


def armed() -> bool:
    return _state is not None


def _finding(what: str) -> dict:
    return {"code": CODE, "message": f"the candidate changed {what}, which the harness relies on"}


def check() -> list[dict]:
    """Findings for everything that differs from arm(); [] when nothing does (or arm() was never called)."""
    s = _state
    if s is None:
        return []
    findings = []
    now = vars(builtins)
    changed = sorted(k for k, v in s["builtins"].items() if k not in now or now[k] is not v)
    added = sorted(k for k in now if k not in s["builtins"] and k not in IGNORED_BUILTINS)
    if changed:
        findings.append(_finding(f"builtins ({', '.join(changed[:8])})"))
    if added:
        findings.append(_finding(f"builtins (added {', '.join(added[:8])})"))
    moved = sorted(n for n, m in s["modules"].items() if sys.modules.get(n) is not m)
    if moved:
        findings.append(_finding(f"sys.modules entries ({', '.join(moved[:8])})"))
    for spec, (holder, name, value) in s["attributes"].items():
        if not _same(getattr(holder, name, _MISSING), value):
            findings.append(_finding(spec.replace(":", ".")))
    for module_name, members in s["harness"].items():
        module = sys.modules.get(module_name)
        if module is None:
            continue  # the sys.modules check above reports the removal
        diff = sorted(k for k, v in members.items() if not _same(_class_member(module, k), v))
        if diff:
            findings.append(_finding(f"{module_name} ({', '.join(diff[:8])})"))
    if s["writer"] is not None:
        writer, cls, fields = s["writer"]
        if type(writer) is not cls or dict(vars(writer)) != fields:
            findings.append(_finding("the report writer"))
    if s["fd"] is not None:
        fd, identity = s["fd"]
        if _fd_identity(fd) != identity:
            findings.append(_finding("the result pipe"))
    # Only options the harness saw at arm(): on an H200 a Triton or CUDA first use adds one of its own, so an
    # added name is no evidence (the guard refuses the roads a candidate would add one by: os, triton.knobs).
    options = _process_options()
    changed = sorted(k for k, v in s["options"].items() if not _same(options.get(k, _MISSING), v))
    if changed:
        findings.append(_finding(f"process-wide options the compared kernels compile or run under "
                                 f"({', '.join(changed[:4])}{', ...' if len(changed) > 4 else ''})"))
    findings.extend(thread_findings())
    return findings


def thread_findings() -> list[dict]:
    """guard:thread when the candidate's code has started a thread since arm(), alive or not."""
    if not _foreign_starts:
        return []
    started = list(_foreign_starts)
    return [{"code": THREAD_CODE,
             "message": f"the candidate started {len(started)} thread(s); work on a thread the harness does not "
                        "watch is refused"}]
