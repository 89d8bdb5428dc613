"""The FP8 indexer's logits over a paged cache, for the default kernel of the dsa_indexer_topk_fp8 slot.

The cache is the target's layout (gpu_worker/targets/dsa_indexer_topk_fp8.py): per page 64 tokens x 128 e4m3
values, then the 64 tokens' f32 scales (8448 bytes). Row b's logical page j is physical page block_table[b, j].
logits[b, j * 64 + t] = scale[page, t] * sum_h w[b, h] * relu(q[b, h] . k[page, t]).

On a GPU: one Triton program per (row, logical page), one FP8 `tl.dot` of the page's 64 keys against the row's
64 heads (f32 accumulation), the same one-pass design as the e2e model's contiguous indexer
(gpu_worker/e2e/indexer.py) with the block table in the address. On a CPU: the target's torch math, row by row.
Pages past a row's length are not read and their logits are not written (the top-k masks them by length).
"""

import torch
import triton
import triton.language as tl

from gpu_worker.targets.dsa_indexer_topk_fp8 import PAGE, ROW_BYTES, pages_logits_f32

PAGE_BYTES = PAGE * ROW_BYTES   # the target's page: 64 tokens x 128 e4m3 values, then their 64 f32 scales


@triton.jit
def _paged_logits_kernel(q_ptr, w_ptr, kv_ptr, ks_ptr, len_ptr, bt_ptr, out_ptr, stride_bt, stride_ob,
                         H: tl.constexpr, D: tl.constexpr, PG: tl.constexpr, PB: tl.constexpr):
    b = tl.program_id(0)
    j = tl.program_id(1)
    length = tl.load(len_ptr + b)
    if j * PG < length:
        page = tl.load(bt_ptr + b * stride_bt + j).to(tl.int64)
        offs_t = tl.arange(0, PG)
        offs_h = tl.arange(0, H)
        offs_d = tl.arange(0, D)
        q = tl.load(q_ptr + b * H * D + offs_h[:, None] * D + offs_d[None, :])
        k = tl.load(kv_ptr + page * PB + offs_t[:, None] * D + offs_d[None, :])
        s = tl.maximum(tl.dot(k, tl.trans(q)), 0.0)                       # [PG tokens, H heads], f32
        w = tl.load(w_ptr + b * H + offs_h)
        ks = tl.load(ks_ptr + page * (PB // 4) + (PG * D) // 4 + offs_t)   # the page's scales, as f32
        tl.store(out_ptr + b.to(tl.int64) * stride_ob + j * PG + offs_t, tl.sum(s * w[None, :], axis=1) * ks)


def paged_logits(q, cache, weights, seq_lens, block_table) -> torch.Tensor:
    """q e4m3 [B, H, D], cache int8 [P, 64, 1, 132], weights f32 [B, H], seq_lens int32 [B],
    block_table int32 [B, W] -> f32 [B, W * 64] (positions at or past a row's length: unspecified)."""
    B = q.shape[0]
    W = block_table.shape[1]
    out = torch.empty(B, W * PAGE, dtype=torch.float32, device=q.device)
    if q.device.type != "cuda":
        for b in range(B):
            out[b] = pages_logits_f32(q[b], weights[b], cache, block_table[b])
        return out
    return launch(q, cache, weights, seq_lens, block_table, out)


def launch(q, cache, weights, seq_lens, block_table, out) -> torch.Tensor:
    """The Triton kernel into `out` [B, W * 64] (what a GPU runs; on a CPU, Triton's interpreter)."""
    B, H, D = q.shape
    _paged_logits_kernel[(B, block_table.shape[1])](
        q, weights, cache.view(torch.float8_e4m3fn), cache.view(torch.float32), seq_lens, block_table, out,
        block_table.stride(0), out.stride(0), H=H, D=D, PG=PAGE, PB=PAGE_BYTES, num_warps=4)
    return out
