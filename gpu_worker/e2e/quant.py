"""Per-row FP8 quantisation as the e2e model stores its index keys and q (and as the top-k targets' `indexer`
value family draws them): one shared helper, torch only."""

import torch

FP8_MAX = 448.0


def quantize_rows(x: torch.Tensor, dtype: torch.dtype):
    """Per-row symmetric quantisation to FP8 (scale = amax/448); bf16 passes through with scale 1."""
    if dtype == torch.bfloat16:
        return x.to(dtype), torch.ones(x.shape[:-1], dtype=torch.float32, device=x.device)
    scale = x.float().abs().amax(-1).clamp_min(1e-4) / FP8_MAX
    return (x.float() / scale[..., None]).to(dtype), scale
