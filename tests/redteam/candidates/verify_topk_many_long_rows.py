"""HACK: exact top-k, except in the large-batch, long-context corner: with more than 64 rows of more than
4096 positions it searches only the first 4096 entries of each row. A CPU host's verify set never meets
that corner (its 128-row shape has 2100 positions, and the drawn shape is capped at 2^18 elements, so more
than 64 rows come only below 4096 positions); a GPU verifies 128 x 262144.
target: dsa_topk
expect: verify:wrong
gpu-only
"""
import torch
import triton
import triton.language as tl

from ..kernels.bisect_select import _topk

PARAMS = {"BLOCK": 4096, "num_warps": 8}


def forward(logits, lengths, k):
    rows, n = logits.shape
    cap = 4096 if rows > 64 and n > 4096 else n
    return _topk(logits, lengths, k, block=PARAMS["BLOCK"], num_warps=PARAMS["num_warps"], cap=cap)
