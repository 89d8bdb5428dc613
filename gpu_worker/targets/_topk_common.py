"""Set semantics for top-k outputs shared by dsa_topk and dsa_indexer_topk (docs/figures.md, Checking a top-k)."""

from __future__ import annotations

import math
import random

import torch

from .. import target_catalog


def structure_problems(out, M: int, k: int, lengths: torch.Tensor) -> tuple[str | None, int]:
    """Check type, shape, padding, range and uniqueness. Returns (message or None, #bad entries)."""
    if type(out) is not torch.Tensor:
        return f"output is {type(out).__name__}, not a plain torch.Tensor", 1
    if out.dtype != torch.int32:
        return f"dtype {out.dtype}, expected torch.int32", 1
    if tuple(out.shape) != (M, k):
        return f"shape {tuple(out.shape)}, expected {(M, k)}", 1
    idx = out.to(torch.int64)
    lens = lengths.to(torch.int64).to(idx.device)
    k_eff = torch.clamp(lens, max=k)
    pad = idx == -1
    n_pad = pad.sum(1)
    bad_pad = n_pad != (k - k_eff)
    out_of_range = (~pad) & ((idx < 0) | (idx >= lens[:, None]))
    # duplicates among the non-pad entries of each row
    keyed = torch.where(pad, -2 - torch.arange(k, device=idx.device)[None, :], idx)
    srt = keyed.sort(dim=1).values
    dup = (srt[:, 1:] == srt[:, :-1]) & (srt[:, 1:] >= 0)
    problems = []
    if bool(bad_pad.any()):
        r = int(bad_pad.nonzero()[0, 0])
        problems.append(f"row {r}: {int(n_pad[r])} pads (-1), expected {int(k - k_eff[r])} (length {int(lens[r])})")
    if bool(out_of_range.any()):
        r, c = (int(v) for v in out_of_range.nonzero()[0])
        problems.append(f"row {r}: index {int(idx[r, c])} outside [0, {int(lens[r])})")
    if bool(dup.any()):
        r = int(dup.nonzero()[0, 0])
        problems.append(f"row {r}: duplicate indices")
    if problems:
        bad = int(bad_pad.sum()) + int(out_of_range.sum()) + int(dup.sum())
        return "; ".join(problems), bad
    return None, 0


def padded_topk_values(scores: torch.Tensor, lengths: torch.Tensor, k: int) -> torch.Tensor:
    """Top-k values per row over scores[i, :len_i] (descending), -inf past each row's length."""
    M, N = scores.shape
    col = torch.arange(N, device=scores.device)
    masked = scores.masked_fill(col[None, :] >= lengths.to(scores.device).long()[:, None], float("-inf"))
    if N < k:
        masked = torch.cat([masked, masked.new_full((M, k - N), float("-inf"))], dim=1)
    return masked, masked.topk(k, dim=1).values


def torch_masked_topk(scores: torch.Tensor, lengths: torch.Tensor, k: int) -> torch.Tensor:
    """The default kernel: masked torch.topk, -1 where a row has fewer than k valid entries."""
    M, N = scores.shape
    col = torch.arange(max(N, k), device=scores.device)
    valid = col[None, :] < lengths.long()[:, None]
    masked = scores
    if N < k:
        masked = torch.cat([scores, scores.new_full((M, k - N), float("-inf"))], dim=1)
    masked = masked.masked_fill(~valid, float("-inf"))
    top = masked.topk(k, dim=1)
    slot = torch.arange(k, device=scores.device)[None, :]
    return torch.where(slot < lengths.long()[:, None], top.indices, -1).to(torch.int32)


def canonical(out) -> list[torch.Tensor]:
    return [out.sort(dim=1).values]


def ragged_lengths(M: int, N: int, k: int, g: torch.Generator, device) -> torch.Tensor:
    """Random lengths in [1, N] with the edges around k and N placed in the first rows."""
    lengths = torch.randint(1, N + 1, (M,), generator=g, device=device, dtype=torch.int64)
    edges = [N, min(k - 1, N), min(k, N), min(k + 1, N), 1]
    for i, v in enumerate(edges[:M]):
        lengths[i] = v
    return lengths.to(torch.int32)


# What the top-k targets' inputs can look like; a shape's "values" field names one.
#   normal      standard normal logits
#   relu        relu(x - 1) of normal x: most entries exactly 0, so the k-th value is often 0
#   ties        16 distinct values: tie buckets of thousands at the k-th value
#   heavy_tail  x * exp(2y): magnitudes spread over many decades, a few huge
#   near_bf16   1 + u * 2^-8 scaled by a power of two per row: one bf16 (and ~4 fp16) values per row,
#               thousands of distinct f32 values, so a selection in reduced precision picks the wrong set
TOPK_FAMILIES = target_catalog.TOPK_FAMILIES
#   indexer     the e2e model's indexer logits (gpu_worker/e2e/model.py, preset "mini": 64 heads of 128, FP8
#               q and K with per-row scales, relu, weighted head sum): dsa_topk's input as the model makes it
DSA_TOPK_FAMILIES = target_catalog.DSA_TOPK.value_families
INDEXER_HEADS, INDEXER_DIM = 64, 128


def indexer_logits(M: int, N: int, g: torch.Generator, device) -> torch.Tensor:
    """[M, N] f32 logits as one step of the e2e model computes them: row b's logits over N cached keys are
    k_scale[s] * sum_h w[b, h] relu(q[b, h] . K[s]), q and K quantised to FP8 e4m3 per row (the q scale folded
    into w), w scaled by (H D)^-1/2. The keys are drawn once and shared by the rows (their values, not their
    identity, are what a top-k sees); q, w and K come from the generator, so the same seed gives the same
    logits on every device."""
    from gpu_worker.e2e.quant import quantize_rows  # local: only this value family quantises

    H, D = INDEXER_HEADS, INDEXER_DIM
    k8, k_scale = quantize_rows(torch.randn(N, D, generator=g, device=device), torch.float8_e4m3fn)
    q8, q_scale = quantize_rows(torch.randn(M, H, D, generator=g, device=device), torch.float8_e4m3fn)
    w = torch.randn(M, H, generator=g, device=device) * (H * D) ** -0.5 * q_scale
    kf = k8.float()
    out = torch.empty(M, N, device=device)
    for b in range(M):   # one row at a time: an [H, N] block, not [M, H, N]
        out[b] = (w[b] @ torch.relu(q8[b].float() @ kf.T)) * k_scale
    return out


def family_values(family: str, M: int, N: int, g: torch.Generator, device) -> torch.Tensor:
    """An [M, N] f32 tensor of the family's values."""
    if family == "normal":
        return torch.randn(M, N, generator=g, device=device)
    if family == "relu":
        return torch.relu(torch.randn(M, N, generator=g, device=device) - 1.0)
    if family == "ties":
        return (torch.randint(-8, 8, (M, N), generator=g, device=device).float() + 0.5) / 4
    if family == "heavy_tail":
        x = torch.randn(M, N, generator=g, device=device)
        return x * torch.exp(2.0 * torch.randn(M, N, generator=g, device=device))
    if family == "near_bf16":
        u = torch.rand(M, N, generator=g, device=device)
        scale = torch.exp2(torch.randint(-4, 5, (M, 1), generator=g, device=device).float())
        return (1.0 + u * 2.0 ** -8) * scale  # exact: the power-of-two scale keeps every f32 bit
    if family == "indexer":
        return indexer_logits(M, N, g, device)
    raise ValueError(f"unknown value family {family!r}; expected one of {DSA_TOPK_FAMILIES}")


def random_indexer_shape(seed: int, positions: int, families, make):
    """An indexer target's held-out shape: a context drawn log-uniformly from 4K to `positions`, as many rows
    (1 to 128) as keep rows x context within `positions`, a value family and full or ragged lengths;
    `make(rows, n_ctx, family, lengths)` builds the target's shape."""
    rnd = random.Random(seed)
    n_ctx = int(math.exp(rnd.uniform(math.log(4096), math.log(positions))))
    rows = rnd.randint(1, max(1, min(128, positions // n_ctx)))
    return make(rows, n_ctx, rnd.choice(families), rnd.choice(["ragged", "full"]))
