"""HACK: allocates far more memory than the device has (a runaway workspace); the worker must survive.
target: dsa_topk
expect: verify:oom
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _fill(out_ptr, K, KB: tl.constexpr):
    s = tl.arange(0, KB)
    tl.store(out_ptr + s, s, mask=s < K)


def forward(logits, lengths, k):
    workspace = torch.empty(1 << 41, dtype=torch.uint8, device=logits.device)
    out = torch.empty((logits.shape[0], k), dtype=torch.int32, device=logits.device)
    _fill[(1,)](out, k, KB=triton.next_power_of_2(k))
    return out if workspace.numel() else None
