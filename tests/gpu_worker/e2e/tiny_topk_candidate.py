"""Test candidate for dsa_topk: exact top-k by k rounds of argmax, one Triton program per row.

Honest but only for tiny rows (the whole row sits in one block); the e2e CPU tests run it
through the Triton interpreter.
"""

import torch
import triton
import triton.language as tl

PARAMS = {"num_warps": 4}


@triton.jit
def _argmax_rounds_kernel(x_ptr, len_ptr, out_ptr, N, K, stride_x, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    n_valid = tl.minimum(tl.maximum(tl.load(len_ptr + row), 0), N)
    x = tl.load(x_ptr + row * stride_x + offs, mask=offs < n_valid, other=float("-inf"))
    for i in range(K):
        pos = tl.argmax(x, axis=0)
        tl.store(out_ptr + row * stride_o + i, tl.where(i < n_valid, pos, -1).to(tl.int32))
        x = tl.where(offs == pos, float("-inf"), x)


def forward(logits, lengths, k):
    m, n = logits.shape
    out = torch.empty((m, k), dtype=torch.int32, device=logits.device)
    _argmax_rounds_kernel[(m,)](
        logits,
        lengths.to(torch.int32),
        out,
        n,
        k,
        logits.stride(0),
        out.stride(0),
        BLOCK=triton.next_power_of_2(n),
        num_warps=PARAMS["num_warps"],
    )
    return out
