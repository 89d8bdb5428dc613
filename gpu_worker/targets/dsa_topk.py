"""dsa_topk: indices of the k largest logits of each row, over the row's valid length (DSA decode)."""

from __future__ import annotations

import math
import random

import torch

from ..target_catalog import DSA_TOPK as INFO
from . import _topk_common as tc
from .base import Shape, TargetSpec, generator

K = 2048
PAST_LENGTH = 1.0e4  # values past a row's length are larger than any valid one: ignoring lengths fails


def _shape(rows, n_ctx, values="normal", lengths="ragged") -> Shape:
    return {"rows": rows, "n_ctx": n_ctx, "k": K, "values": values, "lengths": lengths}


AXIS_CLASSES = INFO.axis_classes
# The drawn shape keeps rows x n_ctx under this, so a CPU host (Triton's interpreter) verifies it in seconds.
RANDOM_ELEMENTS = 1 << 18


def verification_shapes(profile: str) -> list[Shape]:
    """The same on every profile and device: every bin of AXIS_CLASSES, both ends of each axis, a row
    shorter than k, every value family, full and ragged lengths. Few rows at the long lengths keep a
    CPU host's verify short; GPU_SHAPES adds the corners where both axes are large."""
    return [
        _shape(1, 4096, "normal", "full"), _shape(128, 4096, "ties"), _shape(5, 1000, "ties"),
        _shape(7, 20000, "heavy_tail"), _shape(9, 33000, "near_bf16"), _shape(1, 70000, "relu", "full"),
        _shape(1, 262144, "near_bf16", "full"), _shape(1, 262144, "heavy_tail"), _shape(3, 9000, "indexer"),
    ]


GPU_SHAPES = (_shape(128, 262144, "ties"), _shape(128, 131072, "near_bf16", "full"), _shape(64, 65536, "heavy_tail"))
# A CPU host's set (TargetSpec.cpu_shapes): the cheapest first (it takes the burst of calls), then the other
# cheap ones, then one row past 64K before the costly rest (verification stops at the first wrong shape: a kernel
# wrong on ties or tuned on short contexts fails in seconds); the 128-row end with rows just past k (128 x 4096
# was a third of the best's CPU verify), one row at 262144 (the GPU set's second one, heavy_tail, is met at
# 7 x 20000).
CPU_SHAPES = (
    _shape(1, 4096, "normal", "full"), _shape(5, 1000, "ties"), _shape(3, 9000, "indexer"),
    _shape(1, 70000, "relu", "full"), _shape(7, 20000, "heavy_tail"), _shape(128, 2100, "ties"),
    _shape(9, 33000, "near_bf16"), _shape(1, 262144, "near_bf16", "full"),
)


def random_shape(profile: str, seed: int) -> Shape:
    # the "indexer" family is met in the fixed shapes and the benchmark, not drawn here: making its logits
    # (64 heads x 128 per position) for a drawn 2^18 elements takes tens of seconds on a CPU host
    rnd = random.Random(seed)
    n_ctx = int(math.exp(rnd.uniform(math.log(4096), math.log(262144))))
    rows = rnd.randint(1, max(1, min(128, RANDOM_ELEMENTS // n_ctx)))
    return _shape(rows, n_ctx, rnd.choice(tc.TOPK_FAMILIES), rnd.choice(["ragged", "full"]))


def benchmark_shapes(profile: str) -> list[Shape]:
    grid = [(4, 32768), (64, 131072)] if profile == "smoke" else [
        (1, 4096), (1, 32768), (1, 131072), (4, 32768), (4, 131072), (4, 262144),
        (32, 32768), (32, 131072), (32, 262144), (64, 131072), (128, 131072), (128, 262144)]
    return [_shape(m, n, "normal", "full") for m, n in grid]


def make_inputs(shape: Shape, seed: int, device) -> tuple:
    M, N, k = shape["rows"], shape["n_ctx"], shape["k"]
    g = generator(seed, device)
    logits = tc.family_values(shape.get("values", "normal"), M, N, g, device)
    if shape.get("lengths") == "full":
        lengths = torch.full((M,), N, dtype=torch.int32, device=device)
    else:
        lengths = tc.ragged_lengths(M, N, k, g, device)
    past = torch.arange(N, device=device)[None, :] >= lengths.long()[:, None]
    logits = torch.where(past, PAST_LENGTH + logits, logits).contiguous()
    return logits, lengths, k


def reference(inputs: tuple) -> dict:
    logits, lengths, k = inputs
    masked, top = tc.padded_topk_values(logits, lengths, k)
    k_eff = torch.clamp(lengths.long(), max=k)
    kth = top.gather(1, (k_eff - 1).clamp(min=0)[:, None])[:, 0]
    count_gt = (masked > kth[:, None]).sum(1)
    return {"kth": kth, "count_gt": count_gt, "k_eff": k_eff}


def check(output, inputs: tuple, ref: dict) -> tuple[bool, float, str]:
    """Exact set semantics: same k-th value, all selected >= it, same count strictly above it."""
    logits, lengths, k = inputs
    M = logits.shape[0]
    problem, bad = tc.structure_problems(output, M, k, lengths)
    if problem:
        return False, float(bad), problem
    idx = output.to(torch.int64)
    pad = idx == -1
    vals = logits.gather(1, idx.clamp(min=0))
    kth = ref["kth"]
    below = (~pad) & (vals < kth[:, None])
    deficit = torch.where(below, kth[:, None] - vals, torch.zeros_like(vals)).amax(1)
    n_gt = ((~pad) & (vals > kth[:, None])).sum(1)
    wrong_gt = n_gt != ref["count_gt"]
    if bool(below.any()) or bool(wrong_gt.any()):
        r = int((below.any(1) | wrong_gt).nonzero()[0, 0])
        return False, float(deficit.max()), (
            f"row {r}: not the top-{int(ref['k_eff'][r])} set (k-th value {float(kth[r]):g}, "
            f"{int(below[r].sum())} selected below it, {int(n_gt[r])} above it vs {int(ref['count_gt'][r])})")
    return True, 0.0, "exact top-k set"


def baseline(logits, lengths, k):
    return tc.torch_masked_topk(logits, lengths, k)


def output_spec(shape: Shape):
    return [((shape["rows"], shape["k"]), torch.int32)]


def bytes_min(shape: Shape) -> int:
    M, N, k = shape["rows"], shape["n_ctx"], shape["k"]
    return 4 * M * N + 4 * M + 4 * M * k


def flops(shape: Shape) -> int:
    return 0


TARGET = TargetSpec.of(INFO, globals(), canonical=tc.canonical, gpu_shapes=GPU_SHAPES, cpu_shapes=CPU_SHAPES)
