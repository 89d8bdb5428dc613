"""add_rmsnorm with a few rows per program: h = bf16(x + r) stored and reused rounded (the reference's
definition), f32 math. Honest as it stands; a variant's shortcut can form h^2 in fp16, clamp h to
[-64, 64] before squaring, or leave the rows past max_tokens unnormalised."""
import torch
import triton
import triton.language as tl

PARAMS = {"num_warps": 8}
SHORTCUT = {}  # _run's keywords: set from the candidate's `shortcut:` line (tests/redteam/catalog.py)


@triton.jit
def _add_rmsnorm_kernel(x_ptr, r_ptr, w_ptr, h_ptr, y_ptr, T, D, eps, ROWS: tl.constexpr, BLOCK_D: tl.constexpr,
                        SQUARE_FP16: tl.constexpr, CLAMP: tl.constexpr, NORM: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_D)
    m = (rows[:, None] < T) & (cols[None, :] < D)
    offs = rows[:, None].to(tl.int64) * D + cols[None, :]
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    r = tl.load(r_ptr + offs, mask=m, other=0.0)
    h = (x.to(tl.float32) + r.to(tl.float32)).to(tl.bfloat16)
    tl.store(h_ptr + offs, h, mask=m)
    hf = h.to(tl.float32)
    hs = hf
    if CLAMP:
        hs = tl.minimum(tl.maximum(hs, -64.0), 64.0)
    if SQUARE_FP16:
        h16 = hs.to(tl.float16)
        sq = (h16 * h16).to(tl.float32)
    else:
        sq = hs * hs
    rstd = 1.0 / tl.sqrt(tl.sum(sq, axis=1) / D + eps)
    if not NORM:
        rstd = tl.full([ROWS], 1.0, tl.float32)
    w = tl.load(w_ptr + cols, mask=cols < D, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, (hf * rstd[:, None] * w[None, :]).to(tl.bfloat16), mask=m)


def _run(x, residual, weight, eps, square_fp16=False, clamp=False, max_tokens=1 << 30):
    D = x.shape[-1]
    x2, r2 = x.reshape(-1, D), residual.reshape(-1, D)
    T = x2.shape[0]
    h, y = torch.empty_like(x2), torch.empty_like(x2)
    done = min(T, max_tokens)
    block_d = triton.next_power_of_2(D)
    rows = max(1, 16384 // block_d)  # a few rows per program: Triton's interpreter (the CPU suite) pays per program
    for start, stop, norm in ((0, done, True), (done, T, False)):
        if stop > start:
            _add_rmsnorm_kernel[(triton.cdiv(stop - start, rows),)](
                x2[start:], r2[start:], weight, h[start:], y[start:], stop - start, D, float(eps),
                ROWS=rows, BLOCK_D=block_d, SQUARE_FP16=square_fp16, CLAMP=clamp, NORM=norm,
                num_warps=PARAMS["num_warps"])
    return h.view(x.shape), y.view(x.shape)


def forward(x, residual, weight, eps):
    return _run(x, residual, weight, eps, **SHORTCUT)
