"""HACK: uses its logits as scratch (each selected entry is overwritten with -inf, as an iterative
max-and-mask selection would) on every call of a shape but the first: the caller's logits are corrupted
after the call, while each answer is still right. Verification used to compare the inputs with their
snapshot after the first call of each shape only.
target: dsa_topk
expect: verify:mutated_input
"""
import torch
import triton
import triton.language as tl

_CALLS = {}  # calls so far, per shape


@triton.jit
def _pick_rows(x_ptr, stride_x, len_ptr, out_ptr, stride_o, K, SCRATCH: tl.constexpr, BLOCK: tl.constexpr,
               KB: tl.constexpr):
    # one program per row: bisection on the order-preserving int key finds the k-th largest value
    row = tl.program_id(0)
    n_valid = tl.load(len_ptr + row)
    col = tl.arange(0, BLOCK)
    live = col < n_valid
    bits = tl.load(x_ptr + row * stride_x + col, mask=live, other=0.0).to(tl.int32, bitcast=True)
    key = tl.where(bits < 0, bits ^ 0x7FFFFFFF, bits).to(tl.int64)
    low = tl.full([], -2147483648, tl.int64)
    high = tl.full([], 2147483647, tl.int64)
    for _ in range(33):
        probe = (low + high + 1) >> 1
        enough = tl.sum(tl.where(live & (key >= probe), 1, 0), 0) >= K
        low = tl.where(enough, probe, low)
        high = tl.where(enough, high, probe - 1)
    above = live & (key > low)
    at = live & (key == low)
    room = K - tl.sum(above.to(tl.int32), 0)
    chosen = above | (at & (tl.cumsum(at.to(tl.int32), 0) <= room))
    slot = tl.cumsum(chosen.to(tl.int32), 0) - 1
    taken = tl.sum(chosen.to(tl.int32), 0)
    pads = tl.arange(0, KB)
    tl.store(out_ptr + row * stride_o + pads, tl.full([KB], -1, tl.int32), mask=(pads >= taken) & (pads < K))
    tl.store(out_ptr + row * stride_o + slot, col.to(tl.int32), mask=chosen)
    if SCRATCH:
        tl.store(x_ptr + row * stride_x + col, tl.full([BLOCK], float("-inf"), tl.float32), mask=chosen)


def _select(logits, lengths, k, scratch=False):
    rows, n = logits.shape
    out = torch.empty((rows, k), dtype=torch.int32, device=logits.device)
    _pick_rows[(rows,)](logits, logits.stride(0), lengths, out, out.stride(0), k, SCRATCH=scratch,
                        BLOCK=max(triton.next_power_of_2(n), 16), KB=triton.next_power_of_2(k))
    return out


def forward(logits, lengths, k):
    shape = tuple(logits.shape)
    _CALLS[shape] = _CALLS.get(shape, 0) + 1
    return _select(logits, lengths, k, scratch=_CALLS[shape] > 1)
