"""dsa_indexer_topk in two kernels: the scores in f32 (tl.dot of bf16 operands, ReLU, head weights), then
the top-k by bisection (bisect_select.py). Honest as it stands; a variant's shortcut can score only the
first SEEN positions (the rest rank last), round the scores to bf16, or use half of the heads."""
import torch
import triton
import triton.language as tl

from .bisect_select import _topk

PARAMS = {"BLOCK_S": 256}
SPACE = {"BLOCK_S": [128, 256]}
SHORTCUT = {}  # _scores' keywords: set from the candidate's `shortcut:` line (tests/redteam/catalog.py)


@triton.jit
def _scores_kernel(q_ptr, k_ptr, w_ptr, s_ptr, N, SEEN, H: tl.constexpr, D: tl.constexpr, BLOCK_S: tl.constexpr,
                   HEADS_USED: tl.constexpr, ROUND: tl.constexpr):
    m = tl.program_id(0)
    sb = tl.program_id(1)
    offs_s = sb * BLOCK_S + tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, D)
    offs_h = tl.arange(0, H)
    smask = offs_s < N
    kb = tl.load(k_ptr + offs_s[:, None] * D + offs_d[None, :], mask=smask[:, None], other=0.0)
    q = tl.load(q_ptr + (m * H + offs_h[:, None]) * D + offs_d[None, :])
    logits = tl.dot(q, tl.trans(kb), out_dtype=tl.float32)  # [H, BLOCK_S], f32 accumulate
    w = tl.load(w_ptr + m * H + offs_h, mask=offs_h < HEADS_USED, other=0.0)
    acc = tl.sum(tl.maximum(logits, 0.0) * w[:, None], axis=0)
    if ROUND:
        acc = acc.to(tl.bfloat16).to(tl.float32)
    tl.store(s_ptr + m * N + offs_s, tl.where(offs_s < SEEN, acc, float('-inf')), mask=smask)


def _scores(q, k_index, weights, seen=1 << 30, half_heads=False, round_bf16=False):
    M, H, D = q.shape
    N = k_index.shape[0]
    s = torch.empty((M, N), dtype=torch.float32, device=q.device)
    bs = PARAMS["BLOCK_S"]
    _scores_kernel[(M, triton.cdiv(N, bs))](q, k_index, weights, s, N, seen, H=H, D=D, BLOCK_S=bs,
                                            HEADS_USED=H // 2 if half_heads else H, ROUND=round_bf16)
    return s


def forward(q, k_index, weights, lengths, k):
    return _topk(_scores(q, k_index, weights, **SHORTCUT), lengths, k)
