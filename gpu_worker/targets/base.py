"""The TargetSpec contract: what a candidate computes, on which shapes, and how it is checked."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

# the forbidden-call sets live with the targets' metadata (read by the web side without torch)
from ..target_catalog import DENSE_FORBIDDEN, NORM_FORBIDDEN, TOPK_FORBIDDEN  # noqa: F401

CANDIDATES_DIR = Path(__file__).resolve().parent.parent / "candidates"

Shape = dict[str, Any]


@dataclass(frozen=True)
class TargetSpec:
    name: str
    version: int
    description: str
    axes: dict[str, tuple[int, int]]  # operating range, inclusive
    dsls: tuple[str, ...]
    arg_names: tuple[str, ...]
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
    forbidden_torch: frozenset[str]  # torch functions / tensor methods a candidate may not call
    seed_candidates: tuple[str, ...] = ()  # file names under gpu_worker/candidates/<name>/
    e2e_slot: str | None = None
    tolerance: dict[str, float] = field(default_factory=dict)
    # The kinds of input values make_inputs can draw: a shape's "values" field names one. Verification
    # draws every family across its shapes and the benchmark rotates its input sets over them.
    value_families: tuple[str, ...] = ("normal",)
    # Per axis, inclusive bins that tile the operating range: every bin, and both ends of every axis,
    # are verified on every run, whatever the profile (docs/verification.md).
    axis_classes: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    # Where every axis is at its largest at once: verified on a GPU, where they take milliseconds.
    gpu_shapes: tuple[Shape, ...] = ()
    # What a CPU host verifies instead: the range scaled down for Triton's interpreter, which runs every
    # program instance in Python. Each axis at its ends one axis at a time, the other axes small; every
    # bin still has a shape, and a shape lies past every boundary a known shortcut stops at (64K
    # positions, 8K tokens). Where an axis's end costs minutes there, its top bin is met just past the
    # boundary instead; a GPU verifies the end (docs/verification.md). Empty: verification_shapes.
    cpu_shapes: tuple[Shape, ...] = ()

    def seed_paths(self) -> list[Path]:
        return [CANDIDATES_DIR / self.name / f for f in self.seed_candidates]

    def verify_shapes(self, profile: str, seed: int, device: str = "cpu") -> list[Shape]:
        """The fixed shapes (the GPU corners too on a GPU; the scaled-down set on a CPU host) plus one
        drawn from the secret seed."""
        if device == "cpu":
            fixed = list(self.cpu_shapes) or self.verification_shapes(profile)
        else:
            fixed = self.verification_shapes(profile) + list(self.gpu_shapes)
        return fixed + [self.random_shape(profile, seed)]

    def describe(self) -> dict:
        return {
            "name": self.name, "version": self.version, "description": self.description,
            "axes": {k: list(v) for k, v in self.axes.items()}, "dsls": list(self.dsls),
            "args": list(self.arg_names), "seed_candidates": [str(p) for p in self.seed_paths()],
            "e2e_slot": self.e2e_slot, "tolerance": dict(self.tolerance),
            "forbidden_torch": sorted(self.forbidden_torch), "value_families": list(self.value_families),
            "axis_classes": {k: [list(b) for b in v] for k, v in self.axis_classes.items()},
        }


def generator(seed: int, device) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(int(seed) & 0x7FFF_FFFF_FFFF_FFFF)
    return g


def as_outputs(output) -> list:
    return list(output) if isinstance(output, (tuple, list)) else [output]


