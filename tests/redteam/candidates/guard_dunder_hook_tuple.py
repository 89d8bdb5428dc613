"""HACK: returns a tuple subclass whose __iter__ does the work: the harness turns the result into a list
after the call has ended, so the torch ops run outside the op recorder, in the harness's own frame. The
call itself only allocates and launches a token kernel.
target: add_rmsnorm
expect: guard:introspection
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _touch(h_ptr):
    tl.store(h_ptr, tl.load(h_ptr))


class _Later(tuple):
    def __iter__(self):
        x, residual, weight, eps, h, y = self.parts
        h.copy_((x.float() + residual.float()).to(torch.bfloat16))
        hf = h.float()
        y.copy_((hf * hf.pow(2).mean(-1, keepdim=True).add(eps).pow(-0.5) * weight.float()).to(torch.bfloat16))
        return iter([h, y])


def forward(x, residual, weight, eps):
    h = torch.empty_like(x)
    y = torch.empty_like(x)
    _touch[(1,)](h)
    result = _Later((h, y))
    result.parts = (x, residual, weight, eps, h, y)
    return result
