"""How many Triton compiles a candidate costs in one evaluation, counted on a CPU without running a kernel.

python bench/compile_variants.py --target dsa_topk --candidate gpu_worker/candidates/dsa_topk/best.py

A full evaluation's verify child compiles every specialisation its shapes reach, one after another (~2-3 s
each on the H200 host), and that is most of the verify stage's wall time. This calls the candidate's forward
on meta tensors that say they are on a GPU, with each @triton.jit kernel replaced by a recorder, and groups
the launches by the key Triton compiles under: the constexpr values, the launch options, and for each other
argument its dtype, or for an integer its class (== 1, a multiple of 16, other) unless do_not_specialize
names it. Triton 3.x's rule; a count, not a timing.

--compile also compiles one kernel of each key for sm_90a (Triton's compiler, no GPU needed): the CPU suite
runs kernels in Triton's interpreter, which accepts code that the compiler refuses (a name rebound to another
type inside an `if` reached a GPU once before this check existed). Several --target/--candidate pairs are
counted in one process, and a kernel met again with the same source (its own and every jit function and
constexpr it names, transitively) and the same key is compiled once: the bests that hold the folded top-k
(fold_topk.py) share those compiles.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpu_worker.targets import get_target


@contextlib.contextmanager
def _meta_is_cuda():
    """Meta tensors (the inputs and whatever the candidate allocates beside them) say they are on a GPU, so
    that the candidate takes its GPU paths."""
    torch.Tensor.is_cuda = property(lambda t: t.device.type in ("cuda", "meta"))
    try:
        yield
    finally:
        del torch.Tensor.is_cuda


def _as_meta(x):
    return x.to("meta") if isinstance(x, torch.Tensor) else x


def _int_class(v: int) -> str:
    width = "i64" if not -2 ** 31 <= v < 2 ** 31 else "i32"
    return width + ("=1" if v == 1 else "/16" if v % 16 == 0 else "")


class _Recorder:
    def __init__(self, fn, keys):
        self.fn, self.keys = fn, keys
        self.names = fn.arg_names
        self.constexpr = {p.name for p in fn.params if p.is_constexpr}
        self.unspecialised = {self.names[i] if isinstance(i, int) else i for i in fn.do_not_specialize}

    def __getitem__(self, grid):
        return self._launch

    def _launch(self, *args, **kwargs):
        bound = dict(zip(self.names, args))
        options = {k: v for k, v in kwargs.items() if k not in self.names}
        bound.update({k: v for k, v in kwargs.items() if k in self.names})
        key = []
        for name in self.names:
            v = bound.get(name)
            if name in self.constexpr:
                key.append((name, v))
            elif isinstance(v, torch.Tensor):
                key.append((name, str(v.dtype)))
            elif isinstance(v, bool):
                key.append((name, v))
            elif isinstance(v, int):
                key.append((name, "i32" if name in self.unspecialised else _int_class(v)))
            else:
                key.append((name, type(v).__name__))
        key.append(("options", tuple(sorted(options.items()))))
        self.keys[self.fn.__name__].add(tuple(key))


_POINTER = {"torch.float32": "*fp32", "torch.int32": "*i32", "torch.int64": "*i64", "torch.bfloat16": "*bf16",
            "torch.float16": "*fp16", "torch.float8_e4m3fn": "*fp8e4nv", "torch.uint8": "*u8", "torch.int8": "*i8"}


def compile_key(fn, key) -> None:
    """Compile `fn` for sm_90a as a launch with this key would (raises what the compiler raises)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sig, consts, attrs = {}, {}, {}
    options = dict(dict(key)["options"])
    constexpr = {p.name for p in fn.params if p.is_constexpr}
    for i, (name, v) in enumerate(key[:-1]):
        if name in constexpr:
            sig[name], consts[name] = "constexpr", v
        elif isinstance(v, bool):
            sig[name] = "i1"
        elif v in _POINTER:
            sig[name] = _POINTER[v]
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif isinstance(v, str) and v.startswith("i"):
            if v.endswith("=1"):
                sig[name], consts[name] = "constexpr", 1
            else:
                sig[name] = v[:3]
                if v.endswith("/16"):
                    attrs[(i,)] = [["tt.divisibility", 16]]
        else:
            raise ValueError(f"{fn.__name__}: no signature for {name}={v!r}")
    triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs),
                   target=GPUTarget("cuda", 90, 32),
                   options={k: options[k] for k in ("num_warps", "num_stages", "maxnreg") if k in options})


def source_digest(fn, module) -> str:
    """The kernel's source with that of every @triton.jit function and constexpr of `module` it names,
    transitively: two kernels with the same digest and key compile to the same code."""
    import triton
    import triton.language as tl

    seen, todo, parts = set(), [fn.__name__], []
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        obj = getattr(module, name)
        text = obj.src if isinstance(obj, triton.runtime.jit.JITFunction) else repr(obj)
        parts.append(f"{name}={text}")
        if isinstance(obj, triton.runtime.jit.JITFunction):
            todo += [n for n, v in vars(module).items() if n not in seen and re.search(rf"\b{re.escape(n)}\b", text)
                     and isinstance(v, (triton.runtime.jit.JITFunction, tl.constexpr))]
    return hashlib.sha256("\n".join(sorted(parts)).encode()).hexdigest()


def count(target_name: str, candidate: Path, profile: str = "full", seed: int = 1234,
          compiled: set | None = None) -> dict:
    """Launch keys per kernel and stage. With `compiled` (a set, shared between calls), also compile each
    (source, key) not in it for sm_90a and add it."""
    import triton

    spec = importlib.util.spec_from_file_location("candidate_counted", candidate)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    keys: dict[str, set] = defaultdict(set)
    kernels = {name: obj for name, obj in vars(module).items() if isinstance(obj, triton.runtime.jit.JITFunction)}
    for name, obj in kernels.items():
        setattr(module, name, _Recorder(obj, keys))
    target = get_target(target_name)
    result = {}
    stages = (("verify", target.verify_shapes(profile, seed, "cuda")), ("benchmark", target.benchmark_shapes(profile)))
    with _meta_is_cuda():
        for stage, shapes in stages:   # each stage is its own child process: its own compiles
            keys.clear()
            for shape in shapes:
                module.forward(*(_as_meta(x) for x in target.make_inputs(shape, seed, "cpu")))
            result[stage] = {n: len(k) for n, k in sorted(keys.items())}
            result[stage]["total"] = sum(len(k) for k in keys.values())
            if compiled is not None:     # with the module's kernels back: a kernel's helpers are its globals
                recorders = {name: getattr(module, name) for name in kernels}
                for name, fn in kernels.items():
                    setattr(module, name, fn)
                for name, ks in sorted(keys.items()):
                    digest = source_digest(kernels[name], module)
                    for key in sorted(ks, key=repr):
                        if (digest, key) not in compiled:
                            compile_key(kernels[name], key)
                            compiled.add((digest, key))
                for name, rec in recorders.items():
                    setattr(module, name, rec)
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", required=True, action="append", help="repeat, with one --candidate each")
    ap.add_argument("--candidate", type=Path, required=True, action="append")
    ap.add_argument("--profile", default="full")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--compile", action="store_true", help="also compile each kernel variant for sm_90a")
    a = ap.parse_args(argv)
    if len(a.target) != len(a.candidate):
        ap.error("give one --candidate for each --target")
    compiled = set() if a.compile else None
    results = {t: count(t, c, a.profile, a.seed, compiled) for t, c in zip(a.target, a.candidate)}
    print(json.dumps(results if len(results) > 1 else results[a.target[0]], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
