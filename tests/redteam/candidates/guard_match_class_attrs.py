"""HACK: takes attributes through a class pattern (`case object(os=host_os)`), whose attribute names are
plain identifiers of the pattern, not attribute nodes: torch's own os module, then its environ, read into a
module global. The kernel itself is honest.
target: dsa_topk
expect: guard:introspection
"""
import torch
import triton
import triton.language as tl

from ..kernels.bisect_select import _topk

_SEEN = {}


def forward(logits, lengths, k):
    match torch:
        case object(os=host_os):
            match host_os:
                case object(environ=env):
                    _SEEN["env"] = dict(env)
    return _topk(logits, lengths, k)
