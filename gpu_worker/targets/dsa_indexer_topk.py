"""dsa_indexer_topk: the DSA lightning indexer (weighted ReLU head sum of q.k) fused with its top-k."""

from __future__ import annotations

import torch

from ..target_catalog import DSA_INDEXER_TOPK as INFO
from . import _topk_common as tc
from .base import Shape, TargetSpec, generator

K = 2048
HEADS, HEAD_DIM = 64, 128
# the check's bounds (why these values: the catalog entry)
SCORE_RTOL = INFO.tolerance["score_rtol"]
SUM_BANDS = INFO.tolerance["sum_bands"]


def _shape(rows, n_ctx, values="normal", lengths="ragged") -> Shape:
    return {"rows": rows, "n_ctx": n_ctx, "k": K, "values": values, "lengths": lengths}


AXIS_CLASSES = INFO.axis_classes
# What the indexer's inputs can look like (a shape's "values" field names one):
#   normal      normal q, keys and head weights
#   relu        keys point away from every query for most positions: most scores exactly 0
#   ties        16 distinct keys along the context: every row's scores take 16 values
#   heavy_tail  key norms spread log-normally: a few scores dwarf the rest
#   near_bf16   every key is one common key plus a small perturbation: a row's scores fall on a few dozen
#               bf16 values (a hundred or more scores per value near the k-th), so logits kept in bf16
#               (or accumulated in reduced precision) pick the wrong set
FAMILIES = INFO.value_families
RANDOM_POSITIONS = 1 << 16  # rows x n_ctx (and n_ctx) of the drawn shape: seconds in Triton's interpreter


def verification_shapes(profile: str) -> list[Shape]:
    """The same on every profile and device: every bin of AXIS_CLASSES, both ends of each axis, rows
    shorter than k, every value family, full and ragged lengths. Triton's interpreter takes 50-100 us
    per (row, position) here, so a CPU host gets about 650K positions per call: the long contexts come
    one row at a time, and the 128-row batch has short rows (the GPU corners add 128 x 262144)."""
    return [
        _shape(2, 1000, "ties"),  # first: the cheapest, it takes the burst of calls (referee.RUNS "later")
        _shape(1, 4096, "normal", "full"), _shape(128, 2100, "relu"), _shape(2, 12000, "heavy_tail"),
        _shape(9, 5000, "near_bf16"), _shape(1, 40000, "ties", "full"), _shape(1, 262144, "near_bf16"),
    ]


GPU_SHAPES = (_shape(128, 262144, "normal"), _shape(64, 131072, "ties", "full"), _shape(100, 50000, "near_bf16"))
# A CPU host's set (TargetSpec.cpu_shapes): the cheap shapes first, then one row at 140000 (the top bin, past
# 2^17, and the 64K boundary) before the costly rest: verification stops at the first wrong shape, so a kernel
# tuned on short contexts fails in seconds; at 50-100 us per position in the interpreter, 262144 cost 97 s of
# the seed's 191 s there.
CPU_SHAPES = (
    _shape(2, 1000, "ties"), _shape(1, 4096, "normal", "full"), _shape(9, 5000, "near_bf16"),
    _shape(2, 12000, "heavy_tail"), _shape(1, 140000, "near_bf16"), _shape(1, 40000, "ties", "full"),
    _shape(128, 2100, "relu"),
)


def random_shape(profile: str, seed: int) -> Shape:
    return tc.random_indexer_shape(seed, RANDOM_POSITIONS, FAMILIES, _shape)


def benchmark_shapes(profile: str) -> list[Shape]:
    grid = [(4, 32768), (64, 131072)] if profile == "smoke" else [
        (1, 131072), (1, 262144), (4, 32768), (4, 131072), (32, 65536), (64, 131072), (128, 131072),
        (128, 262144)]
    return [_shape(m, n, "normal", "full") for m, n in grid]


def make_inputs(shape: Shape, seed: int, device) -> tuple:
    M, N, k = shape["rows"], shape["n_ctx"], shape["k"]
    g = generator(seed, device)
    q, k_index = _family_qk(shape.get("values", "normal"), M, N, g, device)
    weights = torch.randn(M, HEADS, generator=g, device=device) * HEADS ** -0.5
    if shape.get("lengths") == "full":
        lengths = torch.full((M,), N, dtype=torch.int32, device=device)
    else:
        lengths = tc.ragged_lengths(M, N, k, g, device)
    return q, k_index.contiguous(), weights, lengths, k


def _family_qk(family: str, M: int, N: int, g, device) -> tuple[torch.Tensor, torch.Tensor]:
    q = torch.randn(M, HEADS, HEAD_DIM, generator=g, device=device)
    if family == "normal":
        k = torch.randn(N, HEAD_DIM, generator=g, device=device)
    elif family == "relu":
        # queries in the positive orthant, keys mostly in the negative one: q.k < 0, relu gives exactly 0
        q = q.abs()
        k = -torch.randn(N, HEAD_DIM, generator=g, device=device).abs()
        live = torch.rand(N, generator=g, device=device) < 0.1
        k = torch.where(live[:, None], -k, k)
    elif family == "ties":
        distinct = torch.randn(16, HEAD_DIM, generator=g, device=device)
        k = distinct[torch.randint(0, 16, (N,), generator=g, device=device)]
    elif family == "heavy_tail":
        k = torch.randn(N, HEAD_DIM, generator=g, device=device)
        k = k * torch.exp(1.5 * torch.randn(N, 1, generator=g, device=device))
    elif family == "near_bf16":
        common = torch.randn(1, HEAD_DIM, generator=g, device=device)
        k = common + 0.02 * torch.randn(N, HEAD_DIM, generator=g, device=device)
    else:
        raise ValueError(f"unknown value family {family!r}; expected one of {FAMILIES}")
    return q.to(torch.bfloat16), k.to(torch.bfloat16).contiguous()


def scores(q, k_index, weights, dtype) -> torch.Tensor:
    """I[m, s] = sum_h w[m, h] * relu(q[m, h] . k[s]) in `dtype`, chunked over rows to bound memory."""
    M, N = q.shape[0], k_index.shape[0]
    kt = k_index.to(dtype).t()
    out = torch.empty(M, N, dtype=dtype, device=q.device)
    chunk = max(1, (1 << 29) // max(1, HEADS * N))
    for m0 in range(0, M, chunk):
        qc = q[m0:m0 + chunk].to(dtype)
        logits = torch.relu(qc @ kt)  # [c, H, N]
        out[m0:m0 + chunk] = (logits * weights[m0:m0 + chunk].to(dtype)[:, :, None]).sum(1)
    return out


def reference(inputs: tuple) -> dict:
    q, k_index, weights, lengths, k = inputs
    # f64 on CPU; on a GPU f32 (no TF32: torch's default), exact products of bf16 values
    dtype = torch.float64 if q.device.type == "cpu" else torch.float32
    s = scores(q, k_index, weights, dtype).double()
    masked, top = tc.padded_topk_values(s, lengths, k)
    k_eff = torch.clamp(lengths.long(), max=k)
    kth = top.gather(1, (k_eff - 1).clamp(min=0)[:, None])[:, 0]
    valid = torch.isfinite(masked)
    scale = torch.where(valid, masked.abs(), torch.zeros_like(masked)).amax(1)
    band = SCORE_RTOL * scale + 1e-12
    count_above = (masked > (kth + band)[:, None]).sum(1)
    top_sum = torch.where(torch.isfinite(top), top, torch.zeros_like(top)).sum(1)
    return {"scores": s, "kth": kth, "band": band, "count_above": count_above, "top_sum": top_sum,
            "scale": scale, "k_eff": k_eff}


def check(output, inputs: tuple, ref: dict) -> tuple[bool, float, str]:
    """Set semantics against the reference scores with a band of SCORE_RTOL x the row's max |score|
    around the k-th value, and the selected scores' sum within SUM_BANDS bands of the top-k sum."""
    q, k_index, weights, lengths, k = inputs
    M = q.shape[0]
    problem, bad = tc.structure_problems(output, M, k, lengths)
    if problem:
        return False, float(bad), problem
    idx = output.to(torch.int64).to(ref["scores"].device)
    pad = idx == -1
    vals = ref["scores"].gather(1, idx.clamp(min=0))
    kth, band = ref["kth"], ref["band"]
    below = (~pad) & (vals < (kth - band)[:, None])
    n_above = ((~pad) & (vals > (kth + band)[:, None])).sum(1)
    missing_above = n_above != ref["count_above"]
    sel_sum = torch.where(pad, torch.zeros_like(vals), vals).sum(1)
    sum_err = (sel_sum - ref["top_sum"]).abs()
    sum_bad = sum_err > SUM_BANDS * band
    max_error = float((sum_err / ref["scale"].clamp(min=1e-30)).max())
    if bool(below.any()) or bool(missing_above.any()) or bool(sum_bad.any()):
        r = int((below.any(1) | missing_above | sum_bad).nonzero()[0, 0])
        return False, max_error, (
            f"row {r}: not a top-{int(ref['k_eff'][r])} set within the band ±{float(band[r]):.3g} "
            f"around the k-th score {float(kth[r]):.6g}: {int(below[r].sum())} selected below the band, "
            f"{int(n_above[r])} above it vs {int(ref['count_above'][r])}, selected sum off by "
            f"{float(sum_err[r]):.3g}")
    return True, max_error, f"top-k set within ±{SCORE_RTOL:g} x max|score| of the k-th score"


def baseline(q, k_index, weights, lengths, k):
    """Torch with f32 logits. A bf16-output matmul (docs/figures.md: 3.0 ms at 64 x 128K) rounds the logits
    to bf16 and fails this target's check at the k-th boundary, so it cannot be the default."""
    return tc.torch_masked_topk(scores(q, k_index, weights, torch.float32), lengths, k)


def output_spec(shape: Shape):
    return [((shape["rows"], shape["k"]), torch.int32)]


def bytes_min(shape: Shape) -> int:
    M, N, k = shape["rows"], shape["n_ctx"], shape["k"]
    return 2 * M * HEADS * HEAD_DIM + 2 * N * HEAD_DIM + 4 * M * HEADS + 4 * M + 4 * M * k


def flops(shape: Shape) -> int:
    M, N = shape["rows"], shape["n_ctx"]
    return 2 * M * N * HEADS * HEAD_DIM + 3 * M * N * HEADS


TARGET = TargetSpec.of(INFO, globals(), canonical=tc.canonical, gpu_shapes=GPU_SHAPES, cpu_shapes=CPU_SHAPES,
                       cpu_first_call_only=(_shape(1, 140000, "near_bf16"), _shape(128, 2100, "relu")))
