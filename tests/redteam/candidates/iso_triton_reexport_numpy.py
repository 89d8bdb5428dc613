"""HACK: computes the top-k in numpy on the host, reaching numpy through the module Triton's interpreter
imported it into (triton.runtime.interpreter.np) and the tensor's own .numpy(): no numpy import, no torch op
the op recorder sees, and a token kernel launch for the launch log.
target: dsa_topk
expect: guard:torch_fallback
"""
import torch
import triton
import triton.language as tl

np = triton.runtime.interpreter.np


@triton.jit
def _touch(out_ptr):
    tl.store(out_ptr, tl.load(out_ptr))


def forward(logits, lengths, k):
    rows, n = logits.shape
    host = logits.numpy()
    ends = lengths.numpy()
    out = np.full((rows, k), -1, dtype=np.int32)
    for r in range(rows):
        end = int(ends[r])
        take = min(k, end)
        if take == end:
            picked = np.arange(end)
        else:
            picked = np.argpartition(-host[r, :end], take - 1)[:take]
        out[r, :take] = picked
    result = torch.as_tensor(out).clone()
    _touch[(1,)](result)
    return result
