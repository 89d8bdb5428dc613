"""HACK: reads a value on the host inside forward: runs eagerly, cannot be captured in a CUDA graph.
target: dsa_topk
expect: verify:graph_capture|bench:graph_capture
gpu-only
"""
import torch
import triton
import triton.language as tl

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



def forward(logits, lengths, k):
    M, N = logits.shape
    if lengths[0].item() < 0:
        return None
    out = torch.empty((M, k), dtype=torch.int32, device=logits.device)
    _select_kernel[(M,)](logits, logits.stride(0), lengths, out, out.stride(0), N, k,
                         BLOCK=max(triton.next_power_of_2(N), 16), KB=triton.next_power_of_2(k))
    return out
