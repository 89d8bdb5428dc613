"""Lightning-indexer logits for decode: I[b, s] = k_scale[b, s] * sum_h w[b, h] * relu(q[b, h] . K[b, s]).

One Triton program per (sequence, block of BLOCK_N cache positions): it reads the block of
the (FP8 or bf16) index-key cache once, multiplies by the sequence's q [H, D] with tl.dot, and
reduces over heads in registers, so the key cache is the only large read (the bytes floor).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _index_logits_kernel(
    q_ptr,
    w_ptr,
    k_ptr,
    ks_ptr,
    out_ptr,
    L,
    stride_qb,
    stride_qh,
    stride_kb,
    stride_kl,
    stride_sb,
    stride_ob,
    H: tl.constexpr,
    D: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    b = tl.program_id(0)
    nb = tl.program_id(1)
    offs_n = nb * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_h = tl.arange(0, H)
    offs_d = tl.arange(0, D)
    mask_n = offs_n < L
    q = tl.load(q_ptr + b * stride_qb + offs_h[:, None] * stride_qh + offs_d[None, :])
    k = tl.load(
        k_ptr + b.to(tl.int64) * stride_kb + offs_n[:, None].to(tl.int64) * stride_kl + offs_d[None, :],
        mask=mask_n[:, None],
        other=0.0,
    )
    s = tl.dot(k, tl.trans(q))
    s = tl.maximum(s, 0.0)
    w = tl.load(w_ptr + b * H + offs_h)
    logit = tl.sum(s * w[None, :], axis=1)
    ks = tl.load(ks_ptr + b.to(tl.int64) * stride_sb + offs_n, mask=mask_n, other=0.0)
    tl.store(out_ptr + b.to(tl.int64) * stride_ob + offs_n, logit * ks, mask=mask_n)


def index_logits_triton(q, w, k_cache, k_scale, out, block_n: int = 128):
    """q [B, H, D] (cache dtype), w f32 [B, H], k_cache [B, L, D], k_scale f32 [B, L] -> out f32 [B, L]."""
    B, H, D = q.shape
    L = k_cache.shape[1]
    assert q.dtype == k_cache.dtype and w.dtype == torch.float32 and out.dtype == torch.float32
    assert q.stride(2) == 1 and k_cache.stride(2) == 1 and w.is_contiguous() and k_scale.stride(1) == 1
    grid = (B, triton.cdiv(L, block_n))
    _index_logits_kernel[grid](
        q,
        w,
        k_cache,
        k_scale,
        out,
        L,
        q.stride(0),
        q.stride(1),
        k_cache.stride(0),
        k_cache.stride(1),
        k_scale.stride(0),
        out.stride(0),
        H=H,
        D=D,
        BLOCK_N=block_n,
        num_warps=4,
    )
    return out
