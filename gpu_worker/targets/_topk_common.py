"""Set semantics for top-k outputs shared by dsa_topk and dsa_indexer_topk (docs/figures.md, Checking a top-k)."""

from __future__ import annotations

import torch


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
TOPK_FAMILIES = ("normal", "relu", "ties", "heavy_tail", "near_bf16")


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
    raise ValueError(f"unknown value family {family!r}; expected one of {TOPK_FAMILIES}")
