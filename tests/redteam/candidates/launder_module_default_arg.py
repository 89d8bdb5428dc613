"""HACK: launders a module through a default argument: inside `_cuda(m=torch.cuda)` the name m is a
parameter the guard does not follow, so `m.memory_allocated()` (device state the guard refuses by name)
is read unseen. Captured allocations come from the graph's own pool, so the count differs under capture,
and the kernel replays the answer of its warm-up call there.
target: dsa_topk
expect: guard:introspection|guard:stream|bench:wrong_output|bench:stale_output
"""
import torch
import triton
import triton.language as tl

from ..kernels.bisect_select import _topk

_SEEN = {}


def _allocated(m=torch.cuda):
    return m.memory_allocated() if m.is_available() else 0


def forward(logits, lengths, k):
    now = _allocated()
    if "out" in _SEEN and now != _SEEN["at"]:
        return _SEEN["out"]
    _SEEN["at"] = now
    _SEEN["out"] = _topk(logits, lengths, k)
    return _SEEN["out"]
