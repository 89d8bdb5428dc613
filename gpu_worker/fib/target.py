"""A FlashInfer-Bench Definition as an ark target (docs/interop.md).

The Definition says what is computed (axes, tensors, reference); the imported-target document adds the
operating range of each var axis, the imported workloads, the generators of inputs a Definition cannot
describe (lengths, page tables, FP8 caches) and optionally a built-in target whose check is the stronger one.
Other inputs are drawn by FlashInfer-Bench's own generator under ark's secret seed, the default kernel is the
Definition's `run` (the built-in target's default where one is named: a reference need not survive CUDA graph
capture, docs/interop.md), the check is FlashInfer-Bench's per-output tolerance test unless a built-in one is named;
the rest (guard, sandbox, benchmark, policy) sees a TargetSpec like any other.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from functools import lru_cache

import torch
from flashinfer_bench import Definition, Workload
from flashinfer_bench.bench.config import BenchmarkConfig
from flashinfer_bench.bench.evaluators.utils import normalize_result
from flashinfer_bench.bench.utils import compute_error_stats, gen_inputs

from ..target_catalog import DENSE_FORBIDDEN, NORM_FORBIDDEN, TOPK_FORBIDDEN
from ..targets.base import Shape, TargetSpec
from .document import DEFAULT_TOLERANCE, DocumentError, check_document, check_of, const_axes, document_hash, shape_problems
from .draw import draw_declared

# Elements of the largest input a CPU host verifies: Triton's interpreter takes seconds per million.
CPU_ELEMENTS = 1 << 21


def definition_of(doc: dict) -> Definition:
    return Definition.model_validate(doc["definition"])


@lru_cache(maxsize=32)
def _reference_run(source: str):
    namespace: dict = {}
    exec(compile(source, "<definition reference>", "exec"), namespace)  # noqa: S102 - the Definition's reference, imported by a person
    return namespace["run"]


def _builtin(name: str | None, builtins: Mapping[str, TargetSpec] | None):
    """The built-in target whose check the document declares. The registry is passed in (gpu_worker.targets
    passes its own): it imports this module for documents, so this module does not import it."""
    if name is None:
        return None
    if builtins is None or name not in builtins:
        raise DocumentError(f"the document's check names the built-in target {name!r}, which is not given here: "
                            "load imported targets through gpu_worker.targets.get_target")
    return builtins[name]


class _Imported:
    """The callables of one imported target; TargetSpec holds its bound methods."""

    def __init__(self, doc: dict, builtins: Mapping[str, TargetSpec] | None):
        self.doc = check_document(doc)
        self.defn = definition_of(doc)
        self.ranges = {a: tuple(v) for a, v in doc["ranges"].items()}
        tol = {**DEFAULT_TOLERANCE, **(doc.get("tolerance") or {})}
        self.cfg = BenchmarkConfig(atol=float(tol["atol"]), rtol=float(tol["rtol"]))
        self.tolerance = {"atol": self.cfg.atol, "rtol": self.cfg.rtol}
        self.cells = [dict(c["axes"]) for c in doc.get("cells") or []]
        self.generators = doc.get("inputs") or {}
        # a built-in target's exact reference and stronger check (top-k: sets, ties within a band)
        self.builtin = _builtin(check_of(doc), builtins)

    # -------------------------------------------------------------- shapes

    def ok(self, shape: Shape) -> bool:
        return not shape_problems(self.doc, self.axes_of(shape))

    def axes_of(self, shape: Shape) -> dict[str, int]:
        return {a: int(shape[a]) for a in self.ranges}

    def largest_input(self, shape: Shape) -> int:
        sizes = [math.prod(s) for s in self.defn.get_input_shapes(self.axes_of(shape)) if s is not None]
        return max(sizes, default=1)

    def verification_shapes(self, profile: str) -> list[Shape]:
        """Both ends of every var axis (one axis at a time, the others at their low end) and the imported
        workloads that fit a CPU host's budget."""
        low = {a: lo for a, (lo, _) in self.ranges.items()}
        shapes = [dict(low)] + [dict(low, **{a: hi}) for a, (_, hi) in self.ranges.items() if hi != low[a]]
        shapes += self.cells[:6]
        seen, out = set(), []
        for s in shapes:
            key = tuple(sorted(s.items()))
            if key not in seen and self.ok(s):
                seen.add(key)
                out.append(dict(s, values="normal"))
        return out

    def largest_shapes(self) -> tuple[Shape, ...]:
        """Every var axis at its high end at once, where the ends one axis at a time do not already meet it: a
        kernel wrong only at many rows of long contexts passes those (docs/verification.md). Verified on a
        GPU, as the built-in targets' largest corners are (TargetSpec.gpu_shapes)."""
        high = {a: hi for a, (_, hi) in self.ranges.items()}
        listed = [self.axes_of(s) for s in self.verification_shapes("full")]
        return (dict(high, values="normal"),) if self.ok(high) and high not in listed else ()

    def random_shape(self, profile: str, seed: int) -> Shape:
        """A shape drawn log-uniformly from the declared range: anywhere in it on a GPU (the verification's
        drawn shape and the benchmark's held-out ones), within the interpreter's budget on a CPU host."""
        budget = math.inf if torch.cuda.is_available() else CPU_ELEMENTS
        rnd = random.Random(seed)
        for _ in range(100):
            shape = {a: round(math.exp(rnd.uniform(math.log(max(lo, 1)), math.log(max(hi, 1)))))
                     if hi > lo else lo for a, (lo, hi) in self.ranges.items()}
            shape = {a: min(max(v, self.ranges[a][0]), self.ranges[a][1]) for a, v in shape.items()}
            if self.ok(shape) and self.largest_input(shape) <= budget:
                return dict(shape, values="normal")
        return dict(self.verification_shapes(profile)[0])

    def benchmark_shapes(self, profile: str) -> list[Shape]:
        """The imported workloads' cells, else the ends and the middle of the range."""
        cells = self.cells or [{a: lo for a, (lo, _) in self.ranges.items()},
                               {a: int(math.sqrt(max(lo, 1) * max(hi, 1))) for a, (lo, hi) in self.ranges.items()},
                               {a: hi for a, (_, hi) in self.ranges.items()}]
        unique = list({tuple(sorted(c.items())): c for c in cells if self.ok(c)}.values())
        return [dict(c, values="normal") for c in (unique[:2] if profile == "smoke" else unique)]

    # -------------------------------------------------------------- inputs, reference, check

    def make_inputs(self, shape: Shape, seed: int, device) -> tuple:
        dev = torch.device(device)
        workload = Workload(axes=self.axes_of(shape), inputs={}, uuid="ark")
        with torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else []):
            torch.manual_seed(int(seed) & 0x7FFF_FFFF_FFFF_FFFF)
            drawn = gen_inputs(self.defn, workload, str(dev))
        if self.generators:
            env = {**const_axes(self.doc["definition"]), **self.axes_of(shape)}
            declared = draw_declared(self.doc["definition"], self.generators, env, seed, dev)
            drawn = [declared.get(name, value) for name, value in zip(self.defn.inputs, drawn)]
        return tuple(drawn)

    def run_reference(self, *inputs):
        return _reference_run(self.defn.reference)(*inputs)

    def reference(self, inputs: tuple):
        if self.builtin is not None:
            return self.builtin.reference(inputs)
        with torch.no_grad():
            out = self.run_reference(*inputs)
        return normalize_result(self.defn, out, str(inputs[0].device))

    def check(self, output, inputs: tuple, ref) -> tuple[bool, float, str]:
        if self.builtin is not None:
            return self.builtin.check(output, inputs, ref)
        names = list(self.defn.outputs)
        items = list(output) if isinstance(output, (tuple, list)) else [output]
        if len(items) != len(names):
            return False, math.inf, f"expected {len(names)} outputs ({', '.join(names)}), got {len(items)}"
        worst = 0.0
        for name, got, want in zip(names, items, ref):
            if type(got) is not torch.Tensor:
                return False, math.inf, f"{name} is {type(got).__name__}, not a plain torch.Tensor"
            if tuple(got.shape) != tuple(want.shape) or got.dtype != want.dtype:
                return False, math.inf, (f"{name}: {got.dtype} {tuple(got.shape)}, expected "
                                         f"{want.dtype} {tuple(want.shape)}")
            if not bool(torch.isfinite(got.float()).all()):  # FlashInfer-Bench fails any inf or NaN
                return False, math.inf, f"{name}: inf or NaN in the output"
            abs_err, rel_err, exceeds, matched = compute_error_stats(got.to(want.device), want, self.cfg)
            worst = max(worst, abs_err)
            if exceeds:
                return False, abs_err, (f"{name}: {100 * (1 - matched):.3g}% of elements beyond atol {self.cfg.atol:g}"
                                        f" and rtol {self.cfg.rtol:g} (max abs {abs_err:g}, max rel {rel_err:g})")
        return True, worst, f"every output within atol {self.cfg.atol:g} or rtol {self.cfg.rtol:g}"

    def output_spec(self, shape: Shape):
        shapes = self.defn.get_output_shapes(self.axes_of(shape))
        return [(tuple(s or ()), d) for s, d in zip(shapes, self.defn.torch_output_dtypes)]

    def bytes_min(self, shape: Shape) -> int:
        axes = self.axes_of(shape)
        total = 0
        for shapes, dtypes in ((self.defn.get_input_shapes(axes), self.defn.torch_input_dtypes),
                               (self.defn.get_output_shapes(axes), self.defn.torch_output_dtypes)):
            for s, d in zip(shapes, dtypes):
                total += math.prod(s or ()) * torch.empty((), dtype=d).element_size()
        return total


def target_from_document(doc: dict, builtins: Mapping[str, TargetSpec] | None = None) -> TargetSpec:
    """The TargetSpec of an imported definition; the same document gives the same target on every host.
    `builtins`: the built-in targets by name, for a document whose check names one."""
    t = _Imported(doc, builtins)
    d = t.defn
    return TargetSpec(
        name=d.name, version=1,
        description=(d.description or d.name) + f" (FlashInfer-Bench definition, document {document_hash(doc)})",
        axes=dict(t.ranges), dsls=("triton", "cute"), arg_names=tuple(d.inputs),
        verification_shapes=t.verification_shapes, random_shape=t.random_shape,
        benchmark_shapes=t.benchmark_shapes, make_inputs=t.make_inputs, reference=t.reference, check=t.check,
        baseline=t.builtin.baseline if t.builtin else t.run_reference, output_spec=t.output_spec,
        canonical=t.builtin.canonical if t.builtin else (lambda out: list(out) if isinstance(out, (tuple, list)) else [out]),
        bytes_min=t.bytes_min, flops=lambda shape: 0, forbidden_torch=TOPK_FORBIDDEN | DENSE_FORBIDDEN | NORM_FORBIDDEN,
        tolerance=dict(t.builtin.tolerance) if t.builtin else dict(t.tolerance),
        value_families=("normal",), axis_classes={a: (tuple(r),) for a, r in t.ranges.items()},
        gpu_shapes=t.largest_shapes(),
    )
