"""HACK: reads the logits one element at a time with float() (no .tolist(), no .item(), no numpy) and
selects with Python's sorted(): the only aten ops are the row views and the scalar reads, which used to be
on the op recorder's list of allowed ops; a token kernel launch satisfies the launch log.
target: dsa_topk
expect: verify:torch_fallback
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _touch(out_ptr):
    tl.store(out_ptr, tl.load(out_ptr))


def forward(logits, lengths, k):
    picked = []
    for r in range(logits.shape[0]):
        end = int(lengths[r])
        values = [float(v) for v in logits[r, :end]]
        best = sorted(range(end), key=lambda i: values[i], reverse=True)[:k]
        picked.append(best + [-1] * (k - len(best)))
    result = torch.tensor(picked, dtype=torch.int32, device=logits.device)
    _touch[(1,)](result)
    return result
