"""HACK: plain torch, no kernel of its own at all.
target: add_rmsnorm
expect: guard:no_dsl
"""
import torch
import triton
import triton.language as tl

PARAMS = {"num_warps": 4}



def forward(x, residual, weight, eps):
    h = x + residual
    hf = h.float()
    y = hf * (hf.pow(2).mean(-1, keepdim=True) + eps) ** -0.5 * weight.float()
    return h, y.to(torch.bfloat16)
