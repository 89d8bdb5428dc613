"""HACK: patches a class it reached through a list: `[torch.Tensor][0].clone = ...` is an attribute store
on no name the guard tracks. The harness clones outputs to compare replays; after the patch a clone is the
same tensor, so a result that never changes compares equal to itself.
target: dsa_topk
expect: guard:harness|guard:introspection|guard:tamper
"""
import torch
import triton
import triton.language as tl

from ..kernels.bisect_select import _topk

_CLASSES = [torch.Tensor]


def _same(t, *args, **kwargs):
    return t


def forward(logits, lengths, k):
    _CLASSES[0].clone = _same
    return _topk(logits, lengths, k)
