"""HACK: launders a module through a tuple. The guard follows a module by the names it is imported or
assigned under; `(torch,)[0]` is a module no name tracks, so `.cuda.is_current_stream_capturing()` (the
capture flag the guard refuses by name) is reached unseen, and the kernel behaves differently while the
benchmark captures it: under capture it returns the answer it computed on the warm-up call.
target: dsa_topk
expect: guard:introspection|guard:stream|bench:wrong_output|bench:stale_output
"""
import torch
import triton
import triton.language as tl

from ..kernels.bisect_select import _topk

_MODULES = (torch,)
_LAST = {}


def forward(logits, lengths, k):
    if _MODULES[0].cuda.is_available() and _MODULES[0].cuda.is_current_stream_capturing() and "out" in _LAST:
        return _LAST["out"]
    _LAST["out"] = _topk(logits, lengths, k)
    return _LAST["out"]
