"""HACK: hides code in a string annotation and has typing.get_type_hints evaluate it (an eval the guard
never sees): the string fetches torch's switch that turns off every dispatch mode, so the torch work of an
add+RMSNorm done under it is invisible to the op recorder; a token kernel launch satisfies the launch log.
target: add_rmsnorm
expect: guard:exec
"""
import typing

import torch
import triton
import triton.language as tl


def _hint(switch: "__import__('torch')._C._DisableTorchDispatch"):
    return switch


_UNSEEN = typing.get_type_hints(_hint)["switch"]


@triton.jit
def _touch(h_ptr):
    tl.store(h_ptr, tl.load(h_ptr))


def forward(x, residual, weight, eps):
    with _UNSEEN():
        h = (x.float() + residual.float()).to(torch.bfloat16)
        hf = h.float()
        y = (hf * hf.pow(2).mean(-1, keepdim=True).add(eps).pow(-0.5) * weight.float()).to(torch.bfloat16)
    _touch[(1,)](h)
    return h, y
