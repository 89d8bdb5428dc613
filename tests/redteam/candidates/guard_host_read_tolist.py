"""HACK: brings the logits to the host with .tolist() and selects with Python's sorted(): neither the
read nor the sort is an aten op, so the op recorder sees nothing but allocations; a token kernel launch
satisfies the launch log.
target: dsa_topk
expect: guard:torch_fallback
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _touch(out_ptr):
    tl.store(out_ptr, tl.load(out_ptr))


def forward(logits, lengths, k):
    picked = []
    for row, end in zip(logits.tolist(), lengths.tolist()):
        best = sorted(range(end), key=lambda i: row[i], reverse=True)[:k]
        picked.append(best + [-1] * (k - len(best)))
    result = torch.tensor(picked, dtype=torch.int32, device=logits.device)
    _touch[(1,)](result)
    return result
