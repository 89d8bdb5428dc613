"""dsa_topk seed: exact radix select, one Triton program per row.

forward(logits f32[M, N], lengths int32[M], k) -> int32[M, k]

Each program owns one row. The f32 values are mapped to an order-preserving uint32 key
(negative: flip all bits; non-negative: flip the sign bit; -0.0 is folded onto +0.0). Four
histogram passes over the row (8 bits of the key each, 256-bin tl.histogram; Triton's histogram
costs about bins/32 operations per element and thread, so wider digits are slower)
find the exact key of the k-th largest valid element and how many elements equal to it must be
taken. A fourth pass writes the indices: every key above the threshold, then the first
`need_eq` elements (by position) equal to it; the rest of the row is -1. Deterministic, exact
as a set, no cap on the size of a tie bucket.
"""
import torch
import triton
import triton.language as tl

PARAMS = {"BLOCK": 4096, "num_warps": 8}
SPACE = {"BLOCK": [1024, 2048, 4096, 8192], "num_warps": [4, 8, 16]}


@triton.jit
def _key(x):
    # order-preserving f32 -> uint32; -0.0 and +0.0 map to the same key
    b = x.to(tl.int32, bitcast=True)
    b = tl.where(x == 0.0, 0, b)
    kk = b ^ ((b >> 31) | -2147483648)
    return kk.to(tl.uint32, bitcast=True)


@triton.jit
def _radix_pass(x_ptr, L, k_rem, prefix, pmask,
                SHIFT: tl.constexpr, NB: tl.constexpr, BLOCK: tl.constexpr):
    hist = tl.zeros([NB], dtype=tl.int32)
    for start in range(0, L, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < L
        key = _key(tl.load(x_ptr + offs, mask=m, other=0.0))
        m = m & ((key & pmask) == prefix)
        d = ((key >> SHIFT) & (NB - 1)).to(tl.int32)
        hist += tl.histogram(d, NB, mask=m)
    bins = tl.arange(0, NB)
    ge = tl.cumsum(hist, 0, reverse=True)  # ge[d] = #elements with digit >= d
    dsel = tl.max(tl.where(ge >= k_rem, bins, 0), 0)
    gt = tl.sum(tl.where(bins > dsel, hist, 0), 0)
    prefix = prefix | (dsel.to(tl.uint32) << SHIFT)
    pmask = pmask | tl.full([], (NB - 1) << SHIFT, tl.uint32)
    return k_rem - gt, prefix, pmask


@triton.jit
def _topk_row_kernel(x_ptr, stride_x, len_ptr, out_ptr, stride_o, N, K,
                     BLOCK: tl.constexpr, KBLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row.to(tl.int64) * stride_x
    o_row = out_ptr + row.to(tl.int64) * stride_o
    L = tl.load(len_ptr + row)
    L = tl.minimum(tl.maximum(L, 0), N)
    k_eff = tl.minimum(K, L)

    prefix = tl.full([], 0, tl.uint32)
    pmask = tl.full([], 0, tl.uint32)
    k_rem = k_eff
    k_rem, prefix, pmask = _radix_pass(x_row, L, k_rem, prefix, pmask, 24, 256, BLOCK)
    k_rem, prefix, pmask = _radix_pass(x_row, L, k_rem, prefix, pmask, 16, 256, BLOCK)
    k_rem, prefix, pmask = _radix_pass(x_row, L, k_rem, prefix, pmask, 8, 256, BLOCK)
    k_rem, prefix, pmask = _radix_pass(x_row, L, k_rem, prefix, pmask, 0, 256, BLOCK)
    thr = prefix
    need_eq = k_rem          # how many elements equal to thr to take
    n_gt = k_eff - k_rem     # elements strictly above thr

    cnt_gt = 0
    cnt_eq = 0
    for start in range(0, L, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < L
        key = _key(tl.load(x_row + offs, mask=m, other=0.0))
        is_gt = m & (key > thr)
        is_eq = m & (key == thr)
        cg = tl.cumsum(is_gt.to(tl.int32), 0)
        ce = tl.cumsum(is_eq.to(tl.int32), 0)
        tl.store(o_row + cnt_gt + cg - 1, offs, mask=is_gt)
        take = is_eq & (cnt_eq + ce <= need_eq)
        tl.store(o_row + n_gt + cnt_eq + ce - 1, offs, mask=take)
        cnt_gt += tl.sum(is_gt.to(tl.int32), 0)
        cnt_eq += tl.sum(is_eq.to(tl.int32), 0)
    for start in range(0, K, KBLOCK):
        offs = start + tl.arange(0, KBLOCK)
        tl.store(o_row + offs, tl.full([KBLOCK], -1, tl.int32), mask=(offs >= k_eff) & (offs < K))


def forward(logits, lengths, k):
    assert logits.dim() == 2 and logits.dtype == torch.float32
    M, N = logits.shape
    logits = logits.contiguous()
    lengths = lengths.to(torch.int32).contiguous()
    out = torch.empty((M, k), dtype=torch.int32, device=logits.device)
    if M == 0 or k == 0:
        return out
    p = PARAMS
    _topk_row_kernel[(M,)](logits, logits.stride(0), lengths, out, out.stride(0), N, k,
                           BLOCK=p["BLOCK"], KBLOCK=1024, num_warps=p["num_warps"])
    return out
