"""add_rmsnorm seed (Triton): fused residual add + RMSNorm, one pass over the data.

forward(x bf16[T, D], residual bf16[T, D], weight bf16[D], eps) -> (h bf16[T, D], y bf16[T, D])
h = x + residual rounded to bf16; y = h * rsqrt(mean(h^2) + eps) * weight, computed in f32 from
the bf16-rounded h (as the two-op torch reference does), rounded to bf16.

Each program owns ROWS rows and holds them whole in registers (BLOCK_D = next power of two of
D): x and residual are read once, h and y written once: 8*T*D + 2*D bytes per call.
"""
import torch
import triton
import triton.language as tl

PARAMS = {"ROWS": 1, "num_warps": 8}
SPACE = {"ROWS": [1, 2, 4], "num_warps": [4, 8, 16, 32]}


@triton.jit
def _add_rmsnorm_kernel(x_ptr, r_ptr, w_ptr, h_ptr, y_ptr, T, D, eps,
                        ROWS: tl.constexpr, BLOCK_D: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_D)
    rm = rows < T
    cm = cols < D
    m = rm[:, None] & cm[None, :]
    offs = rows.to(tl.int64)[:, None] * D + cols[None, :]
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    r = tl.load(r_ptr + offs, mask=m, other=0.0)
    h = (x.to(tl.float32) + r.to(tl.float32)).to(tl.bfloat16)
    tl.store(h_ptr + offs, h, mask=m)
    hf = h.to(tl.float32)
    ms = tl.sum(hf * hf, axis=1) / D
    rstd = 1.0 / tl.sqrt(ms + eps)
    w = tl.load(w_ptr + cols, mask=cm, other=0.0).to(tl.float32)
    y = hf * rstd[:, None] * w[None, :]
    tl.store(y_ptr + offs, y.to(tl.bfloat16), mask=m)


def forward(x, residual, weight, eps):
    assert x.dtype == torch.bfloat16 and residual.dtype == torch.bfloat16 and weight.dtype == torch.bfloat16
    D = x.shape[-1]
    x2 = x.reshape(-1, D).contiguous()
    r2 = residual.reshape(-1, D).contiguous()
    w = weight.contiguous()
    T = x2.shape[0]
    h = torch.empty_like(x2)
    y = torch.empty_like(x2)
    if T > 0:
        ROWS = PARAMS["ROWS"]
        _add_rmsnorm_kernel[(triton.cdiv(T, ROWS),)](
            x2, r2, w, h, y, T, D, float(eps),
            ROWS=ROWS, BLOCK_D=triton.next_power_of_2(D), num_warps=PARAMS["num_warps"])
    return h.view(x.shape), y.view(x.shape)
