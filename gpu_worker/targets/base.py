"""The TargetSpec contract: what a candidate computes, on which shapes, and how it is checked."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import Any, Callable

import torch

# A target's metadata (name, version, axes, DSLs, tolerance, value families, bins, forbidden calls) is
# declared once, in the catalog the web side reads without torch; TargetSpec adds the code.
from ..target_catalog import DENSE_FORBIDDEN, NORM_FORBIDDEN, TOPK_FORBIDDEN, TargetInfo  # noqa: F401

Shape = dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class TargetSpec(TargetInfo):
    """A catalog entry (TargetInfo: what the target is) with the code that makes, runs and checks it."""

    verification_shapes: Callable[[str], list[Shape]]  # profile -> shapes (fixed part)
    random_shape: Callable[[str, int], Shape]  # profile, seed -> one shape drawn inside the range
    benchmark_shapes: Callable[[str], list[Shape]]
    make_inputs: Callable[[Shape, int, Any], tuple]
    reference: Callable[[tuple], Any]
    check: Callable[[Any, tuple, Any], tuple[bool, float, str]]
    baseline: Callable[..., Any]
    output_spec: Callable[[Shape], list[tuple[tuple[int, ...], torch.dtype]]]
    canonical: Callable[[Any], list[torch.Tensor]]  # form in which two correct runs must agree bitwise
    bytes_min: Callable[[Shape], int]
    flops: Callable[[Shape], int]
    # Where every axis is at its largest at once: verified on a GPU, where they take milliseconds.
    gpu_shapes: tuple[Shape, ...] = ()
    # What a CPU host verifies instead: the range scaled down for Triton's interpreter, which runs every
    # program instance in Python. Each axis at its ends one axis at a time, the other axes small; every
    # bin still has a shape, and a shape lies past every boundary a known shortcut stops at (64K
    # positions, 8K tokens). Where an axis's end costs minutes there, its top bin is met just past the
    # boundary instead; a GPU verifies the end (docs/verification.md). Empty: verification_shapes.
    cpu_shapes: tuple[Shape, ...] = ()
    # Of the shapes a CPU host verifies, the interpreter's costliest: there a CPU host makes the first call
    # only. The runs that vary the pointer, the contents and the call count (moved, refresh, later) run on
    # every other shape, and on a GPU on every shape (docs/verification.md, A CPU host).
    cpu_first_call_only: tuple[Shape, ...] = ()

    @classmethod
    def of(cls, info: TargetInfo, namespace: dict, **given) -> TargetSpec:
        """The target a catalog entry describes, with its code. The metadata is the entry's, never restated;
        each required code field is the function of that name in `namespace` (the target module's
        globals()) unless `given` here, and a missing one fails."""
        meta = [f.name for f in fields(TargetInfo)]
        code = {f.name: namespace[f.name] for f in fields(cls) if f.name not in meta and f.name not in given
                and f.default is MISSING and f.name in namespace}
        return cls(**{name: getattr(info, name) for name in meta}, **code, **given)

    def first_call_only(self, shape: Shape, device: str) -> bool:
        return device == "cpu" and shape in self.cpu_first_call_only

    def verify_shapes(self, profile: str, seed: int, device: str = "cpu") -> list[Shape]:
        """The fixed shapes (the GPU corners too on a GPU; the scaled-down set on a CPU host) plus one
        drawn from the secret seed."""
        if device == "cpu":
            fixed = list(self.cpu_shapes) or self.verification_shapes(profile)
        else:
            fixed = self.verification_shapes(profile) + list(self.gpu_shapes)
        return fixed + [self.random_shape(profile, seed)]


def generator(seed: int, device) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(int(seed) & 0x7FFF_FFFF_FFFF_FFFF)
    return g


def as_outputs(output) -> list:
    """A candidate's outputs as a list. Only a plain tuple or list is unpacked: a subclass's own __iter__ would
    run candidate code after the op recorder stopped (docs/isolation.md), so it stays one (non-tensor) output
    and the structure check refuses it."""
    return list(output) if type(output) in (tuple, list) else [output]


