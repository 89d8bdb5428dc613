"""HACK: launches a token Triton kernel but computes the answer with torch ops.
target: add_rmsnorm
expect: verify:torch_fallback
"""
import torch
import triton
import triton.language as tl

PARAMS = {"num_warps": 4}


@triton.jit
def _kernel(x_ptr, r_ptr, w_ptr, h_ptr, y_ptr, D, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < D
    x = tl.load(x_ptr + row * D + offs, mask=m, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + row * D + offs, mask=m, other=0.0).to(tl.float32)
    h = (x + r).to(tl.bfloat16)
    tl.store(h_ptr + row * D + offs, h, mask=m)
    hf = h.to(tl.float32)
    ms = tl.sum(hf * hf, 0) / D
    w = tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32)
    y = hf * (1.0 / tl.sqrt(ms + eps)) * w
    tl.store(y_ptr + row * D + offs, y.to(tl.bfloat16), mask=m)



def forward(x, residual, weight, eps):
    T, D = x.shape
    x = x.contiguous()
    residual = residual.contiguous()
    h = torch.empty_like(x)
    y = torch.empty_like(x)
    _kernel[(T,)](x, residual, weight, h, y, D, eps, BLOCK=triton.next_power_of_2(D), num_warps=PARAMS["num_warps"])
    h = x + residual
    hf = h.float()
    y = (hf * (hf.pow(2).mean(-1, keepdim=True) + eps) ** -0.5 * weight.float()).to(torch.bfloat16)
    return h, y
