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

from ..kernels.bisect_select import _topk

_CALLS = {}  # calls so far, per shape


def forward(logits, lengths, k):
    shape = tuple(logits.shape)
    _CALLS[shape] = _CALLS.get(shape, 0) + 1
    return _topk(logits, lengths, k, scratch=_CALLS[shape] > 1)
