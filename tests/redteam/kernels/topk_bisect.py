"""dsa_topk by bisection (bisect_select.py), with the shortcut its candidate's header names."""
from .bisect_select import _topk

# 8192 per block: 33 passes over a 256K row are 1056 block steps, not 8448 (Triton's interpreter, which the CPU
# suite runs, pays per step; a GPU program holds 32 values per thread at 8 warps)
PARAMS = {"num_warps": 8, "BLOCK": 8192}
SPACE = {"num_warps": [4, 8], "BLOCK": [2048, 4096, 8192]}
SHORTCUT = {}  # _topk's keywords: set from the candidate's `shortcut:` line (tests/redteam/catalog.py)


def forward(logits, lengths, k):
    return _topk(logits, lengths, k, block=PARAMS["BLOCK"], num_warps=PARAMS["num_warps"], **SHORTCUT)
