"""HACK: exact for its first 40 calls (more than verification makes of one shape), then the fast wrong path:
the benchmark's captures come after its warm-up calls. On a GPU verification makes more than 40 calls over
all its shapes, so the wrong path starts at a later shape's first call there (`verify:wrong`, H200 2026-12-05).
target: dsa_topk
expect: verify:wrong|verify:call_count|verify:graph_replay|verify:side_stream|bench:wrong_output|bench:stale_output
gpu-only
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _key(x_row, offs, m, ROUND: tl.constexpr, CLAMP: tl.constexpr):
    x = tl.load(x_row + offs, mask=m, other=0.0)
    if ROUND:
        x = x.to(tl.bfloat16).to(tl.float32)
    if CLAMP:
        x = tl.minimum(tl.maximum(x, -8.0), 8.0)
    b = x.to(tl.int32, bitcast=True)
    return tl.where(b < 0, b ^ 0x7FFFFFFF, b).to(tl.int64)


@triton.jit
def _count_ge(x_row, L, mid, BLOCK: tl.constexpr, ROUND: tl.constexpr, CLAMP: tl.constexpr):
    cnt = 0
    for start in range(0, L, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        key = _key(x_row, offs, offs < L, ROUND, CLAMP)
        cnt += tl.sum(tl.where((offs < L) & (key >= mid), 1, 0), 0)
    return cnt


@triton.jit
def _select_kernel(x_ptr, stride_x, len_ptr, out_ptr, stride_o, N, K, CAP, BLOCK: tl.constexpr,
                   KB: tl.constexpr, ROUND: tl.constexpr, CLAMP: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row.to(tl.int64) * stride_x
    o_row = out_ptr + row.to(tl.int64) * stride_o
    L = tl.minimum(tl.maximum(tl.load(len_ptr + row), 0), N)
    k_eff = tl.minimum(K, L)
    L = tl.minimum(L, CAP)
    lo = tl.full([], -2147483648, tl.int64)
    hi = tl.full([], 2147483647, tl.int64)
    for _ in range(33):
        mid = (lo + hi + 1) >> 1
        take = _count_ge(x_row, L, mid, BLOCK, ROUND, CLAMP) >= k_eff
        lo = tl.where(take, mid, lo)
        hi = tl.where(take, hi, mid - 1)
    need = k_eff - _count_ge(x_row, L, lo + 1, BLOCK, ROUND, CLAMP)
    n_gt = 0
    n_eq = 0
    for start in range(0, L, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < L
        key = _key(x_row, offs, m, ROUND, CLAMP)
        gt = m & (key > lo)
        eq = m & (key == lo)
        eq_rank = n_eq + tl.cumsum(eq.to(tl.int32), 0)
        take_eq = eq & (eq_rank <= need)
        tl.store(o_row + n_gt + tl.cumsum(gt.to(tl.int32), 0) - 1, offs.to(tl.int32), mask=gt)
        tl.store(o_row + (k_eff - need) + eq_rank - 1, offs.to(tl.int32), mask=take_eq)
        n_gt += tl.sum(gt.to(tl.int32), 0)
        n_eq += tl.sum(eq.to(tl.int32), 0)
    slots = tl.arange(0, KB)
    tl.store(o_row + slots, tl.full([KB], -1, tl.int32), mask=(slots >= k_eff) & (slots < K))


def _topk(logits, lengths, k, cap=1 << 30, round_bf16=False, clamp=False):
    M, N = logits.shape
    out = torch.empty((M, k), dtype=torch.int32, device=logits.device)
    if M:
        _select_kernel[(M,)](logits, logits.stride(0), lengths.to(torch.int32), out, out.stride(0), N, k, cap,
                             BLOCK=1024, KB=triton.next_power_of_2(k), ROUND=round_bf16, CLAMP=clamp,
                             num_warps=4)
    return out


_calls = []


def forward(logits, lengths, k):
    _calls.append(1)
    return _topk(logits, lengths, k, cap=4096 if len(_calls) > 40 else 1 << 30)
