"""HACK: the indexer scores only the first 65536 keys of the context and ranks the rest last (a kernel
tuned on the contexts of its own tests): right up to 64K, wrong beyond.
target: dsa_indexer_topk
expect: verify:wrong
"""
import torch
import triton
import triton.language as tl

PARAMS = {"BLOCK_S": 256}


@triton.jit
def _scores_kernel(q_ptr, k_ptr, w_ptr, s_ptr, N, H: tl.constexpr, D: tl.constexpr, BLOCK_S: tl.constexpr):
    m = tl.program_id(0)
    sb = tl.program_id(1)
    offs_s = sb * BLOCK_S + tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, D)
    offs_h = tl.arange(0, H)
    smask = offs_s < N
    seen = offs_s < 65536
    kb = tl.load(k_ptr + offs_s[:, None] * D + offs_d[None, :], mask=smask[:, None], other=0.0)
    q = tl.load(q_ptr + (m * H + offs_h[:, None]) * D + offs_d[None, :])
    logits = tl.dot(q, tl.trans(kb), out_dtype=tl.float32)  # [H, BLOCK_S], f32 accumulate
    w = tl.load(w_ptr + m * H + offs_h)
    acc = tl.sum(tl.maximum(logits, 0.0) * w[:, None], axis=0)
    tl.store(s_ptr + m * N + offs_s, tl.where(seen, acc, float('-inf')), mask=smask)


@triton.jit
def _select_kernel(x_ptr, stride_x, len_ptr, out_ptr, stride_o, N, K, BLOCK: tl.constexpr, KB: tl.constexpr):
    row = tl.program_id(0)
    L = tl.load(len_ptr + row)
    offs = tl.arange(0, BLOCK)
    valid = offs < L
    x = tl.load(x_ptr + row * stride_x + offs, mask=valid, other=0.0)
    b = x.to(tl.int32, bitcast=True)
    key = tl.where(b < 0, b ^ 0x7FFFFFFF, b).to(tl.int64)
    lo = tl.full([], -2147483648, tl.int64)
    hi = tl.full([], 2147483647, tl.int64)
    for _ in range(33):
        mid = (lo + hi + 1) >> 1
        cnt = tl.sum(tl.where(valid & (key >= mid), 1, 0), 0)
        take = cnt >= K
        lo = tl.where(take, mid, lo)
        hi = tl.where(take, hi, mid - 1)
    gt = valid & (key > lo)
    eq = valid & (key == lo)
    need = K - tl.sum(gt.to(tl.int32), 0)
    eq_rank = tl.cumsum(eq.to(tl.int32), 0)
    sel = gt | (eq & (eq_rank <= need))
    pos = tl.cumsum(sel.to(tl.int32), 0) - 1
    n_sel = tl.sum(sel.to(tl.int32), 0)
    slots = tl.arange(0, KB)
    tl.store(out_ptr + row * stride_o + slots, tl.full([KB], -1, tl.int32), mask=(slots >= n_sel) & (slots < K))
    tl.store(out_ptr + row * stride_o + pos, offs.to(tl.int32), mask=sel)



def forward(q, k_index, weights, lengths, k):
    M, H, D = q.shape
    N = k_index.shape[0]
    s = torch.empty((M, N), dtype=torch.float32, device=q.device)
    bs = PARAMS["BLOCK_S"]
    _scores_kernel[(M, triton.cdiv(N, bs))](q, k_index, weights, s, N, H=H, D=D, BLOCK_S=bs)
    out = torch.empty((M, k), dtype=torch.int32, device=q.device)
    _select_kernel[(M,)](s, s.stride(0), lengths, out, out.stride(0), N, k,
                         BLOCK=max(triton.next_power_of_2(N), 16), KB=triton.next_power_of_2(k))
    return out
