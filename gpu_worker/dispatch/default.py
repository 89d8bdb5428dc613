"""The default kernels, what serving runs where no route applies: masked torch.topk for dsa_topk; for
dsa_indexer_topk_fp8, one-pass paged logits then the same top-k."""

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


def default_indexer_topk_fp8(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table) -> torch.Tensor:
    """The default dsa_indexer_topk_fp8 kernel: the paged logits in one pass (dispatch/paged_logits.py), masked
    torch.topk over them, then each position's page id x 64 + offset, -1 padded (the target's contract)."""
    # local: the logits kernel is Triton, which a dispatcher of other targets never needs to import
    from gpu_worker.dispatch.paged_logits import paged_logits
    from gpu_worker.targets.dsa_indexer_topk_fp8 import global_ids  # local: as above, for this target alone

    logits = paged_logits(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table)
    return global_ids(default_topk(logits, seq_lens, 2048), block_table)
