"""The default dsa_topk kernel: masked torch.topk (what serving runs when no route applies)."""

import torch


def default_topk(logits: torch.Tensor, lengths: torch.Tensor, k: int) -> torch.Tensor:
    """int32[M, k] indices of the k largest of logits[i, :lengths[i]], padded with -1."""
    if logits.dim() != 2 or logits.dtype != torch.float32:
        raise ValueError(f"logits must be f32[M, N], got {logits.dtype}{list(logits.shape)}")
    m, n = logits.shape
    positions = torch.arange(n, device=logits.device)
    masked = logits.masked_fill(positions[None, :] >= lengths.to(torch.int64)[:, None], float("-inf"))
    take = min(k, n)
    values, indices = torch.topk(masked, take, dim=1)
    indices = indices.to(torch.int32).masked_fill(values == float("-inf"), -1)
    if take < k:
        pad = torch.full((m, k - take), -1, dtype=torch.int32, device=logits.device)
        indices = torch.cat([indices, pad], dim=1)
    return indices
