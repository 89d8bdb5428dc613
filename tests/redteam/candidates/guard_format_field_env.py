"""HACK: reads the child's environment through a format field ("{0.__globals__[torch].os.environ}"): the
attribute path is inside a string, so no dunder, no .os and no environ appears in the syntax tree. The
kernel itself is honest.
target: dsa_topk
expect: guard:introspection
"""
import torch
import triton
import triton.language as tl

from ..kernels.bisect_select import _topk

_SEEN = {}


def forward(logits, lengths, k):
    _SEEN["env"] = "{0.__globals__[torch].os.environ}".format(forward)
    return _topk(logits, lengths, k)
