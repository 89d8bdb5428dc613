"""Set semantics for top-k outputs shared by dsa_topk and dsa_indexer_topk (REFERENCE.md §1)."""

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
