"""dsa_topk by bisection (bisect_select.py), with the shortcut its candidate's header names."""
from .bisect_select import _topk

PARAMS = {"num_warps": 4, "BLOCK": 1024}
SPACE = {"num_warps": [4, 8], "BLOCK": [512, 1024, 2048]}
SHORTCUT = {}  # _topk's keywords: set from the candidate's `shortcut:` line (tests/redteam/catalog.py)


def forward(logits, lengths, k):
    return _topk(logits, lengths, k, block=PARAMS["BLOCK"], num_warps=PARAMS["num_warps"], **SHORTCUT)
