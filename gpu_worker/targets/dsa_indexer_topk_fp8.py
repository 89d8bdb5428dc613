"""dsa_indexer_topk_fp8: the DSA lightning indexer as DeepSeek-V3.2 serves it, FP8 q and a paged FP8 K cache.

The contract is FlashInfer-Bench's `dsa_topk_indexer_fp8_h64_d128_topk2048_ps64` (docs/kernels.md, "The FP8
indexer"): q_index_fp8 e4m3 [B, 64, 128] (its per-head scale already folded into the weights);
k_index_cache_fp8 int8 [num_pages, 64, 1, 132], each page 64 x 128 FP8 bytes then 64 f32 scales (DeepGEMM's
paged layout); weights f32 [B, 64]; seq_lens int32 [B]; block_table int32 [B, max_num_pages]. Output int32
[B, 2048]: global token ids (page id x 64 + offset) of the row's 2048 largest logits
    I[b, t] = scale_t * sum_h weights[b, h] * relu(q[b, h] . k_t)
over its first seq_lens[b] tokens; a row shorter than 2048 holds -1 in the slots past its length (the order
of a row's entries is free: the check compares sets).
"""

from __future__ import annotations

import torch

from ..target_catalog import DSA_INDEXER_TOPK_FP8 as INFO
from . import _topk_common as tc
from .base import Shape, TargetSpec, generator

K = 2048
HEADS, HEAD_DIM, PAGE = 64, 128, 64
ROW_BYTES = HEAD_DIM + 4
FP8_MAX = 448.0
# How far a candidate's logit may sit from the exact one, as a fraction of the token's absolute-term sum
# S_t (why 2^-10: the catalog entry). Two tokens may swap at the k-th boundary only if their exact logits
# are within the sum of their two bands (docs/kernels.md, "The FP8 indexer").
ACC_EPS = INFO.tolerance["acc_eps"]


def _shape(rows, n_ctx, values="normal", lengths="ragged") -> Shape:
    return {"rows": rows, "n_ctx": n_ctx, "k": K, "values": values, "lengths": lengths}


AXIS_CLASSES = INFO.axis_classes
# The value families of dsa_indexer_topk, drawn in f32 and then quantised as a server does (per-token K
# scale amax/448, per-head q scale folded into the weights):
#   normal, relu (most logits exactly 0), ties (16 distinct keys), heavy_tail (key norms log-normal: the
#   K scales spread over decades), near_bf16 (one common key plus 2% noise: after FP8 rounding most keys
#   coincide, so ties and near-ties crowd the k-th value)
FAMILIES = INFO.value_families
RANDOM_POSITIONS = 1 << 16


def verification_shapes(profile: str) -> list[Shape]:
    """Every bin of AXIS_CLASSES, both ends of each axis, rows shorter than k, every family, full and
    ragged lengths; as in dsa_indexer_topk, the long contexts come one row at a time on a CPU host."""
    return [
        _shape(2, 4096, "ties"), _shape(1, 4096, "normal", "full"), _shape(128, 2100, "relu"),
        _shape(2, 12000, "heavy_tail"), _shape(9, 5000, "near_bf16"), _shape(1, 40000, "ties", "full"),
        _shape(1, 262144, "near_bf16"),
    ]


GPU_SHAPES = (_shape(128, 262144, "normal"), _shape(64, 131072, "ties", "full"), _shape(100, 50000, "near_bf16"))
# A CPU host's set (TargetSpec.cpu_shapes), as dsa_indexer_topk's: the cheap shapes first, then one row at 140000
# (the top bin, past 2^17, and the 64K boundary) before the costly rest, instead of 262144 positions.
CPU_SHAPES = (
    _shape(1, 4096, "normal", "full"), _shape(2, 4096, "ties"), _shape(9, 5000, "near_bf16"),
    _shape(2, 12000, "heavy_tail"), _shape(1, 140000, "near_bf16"), _shape(1, 40000, "ties", "full"),
    _shape(128, 2100, "relu"),
)


def random_shape(profile: str, seed: int) -> Shape:
    return tc.random_indexer_shape(seed, RANDOM_POSITIONS, FAMILIES, _shape)


def benchmark_shapes(profile: str) -> list[Shape]:
    grid = [(4, 32768), (64, 131072)] if profile == "smoke" else [
        (1, 131072), (1, 262144), (4, 32768), (4, 131072), (32, 65536), (64, 131072), (128, 131072)]
    return [_shape(m, n, "normal", "full") for m, n in grid]


def quantize_fp8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-vector (last dim) e4m3 quantisation: (x / s) in FP8 and s = amax / 448 in f32."""
    s = (x.abs().amax(-1, keepdim=True).clamp(min=1e-4) / FP8_MAX).float()
    return (x / s).to(torch.float8_e4m3fn), s


def pack_pages(k_fp8: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """[P, 64, 128] e4m3 + [P, 64] f32 -> the paged cache int8 [P, 64, 1, 132]: per page 64 x 128 bytes of
    values, then the 64 scales' bytes."""
    P = k_fp8.shape[0]
    flat = torch.empty(P, PAGE * ROW_BYTES, dtype=torch.uint8, device=k_fp8.device)
    flat[:, :PAGE * HEAD_DIM] = k_fp8.reshape(P, -1).view(torch.uint8)
    flat[:, PAGE * HEAD_DIM:] = scale.reshape(P, PAGE).contiguous().view(torch.uint8)
    return flat.view(torch.int8).view(P, PAGE, 1, ROW_BYTES)


def unpack_pages(cache: torch.Tensor, pages: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The given pages' keys as exact f64 [len(pages) * 64, 128] and their scales f64 [len(pages) * 64]."""
    flat = cache.view(torch.uint8).reshape(cache.shape[0], PAGE * ROW_BYTES)[pages.long()]
    vals = flat[:, :PAGE * HEAD_DIM].contiguous().view(torch.float8_e4m3fn).to(torch.float64)
    scales = flat[:, PAGE * HEAD_DIM:].contiguous().view(torch.float32).to(torch.float64)
    return vals.reshape(-1, HEAD_DIM), scales.reshape(-1)


def _family_keys(family: str, n: int, g, device, shared: dict) -> torch.Tensor:
    if family in ("normal",):
        return torch.randn(n, HEAD_DIM, generator=g, device=device)
    if family == "relu":
        k = -torch.randn(n, HEAD_DIM, generator=g, device=device).abs()
        live = torch.rand(n, generator=g, device=device) < 0.1
        return torch.where(live[:, None], -k, k)
    if family == "ties":
        return shared["distinct"][torch.randint(0, 16, (n,), generator=g, device=device)]
    if family == "heavy_tail":
        k = torch.randn(n, HEAD_DIM, generator=g, device=device)
        return k * torch.exp(1.5 * torch.randn(n, 1, generator=g, device=device))
    if family == "near_bf16":
        return shared["common"] + 0.02 * torch.randn(n, HEAD_DIM, generator=g, device=device)
    raise ValueError(f"unknown value family {family!r}; expected one of {FAMILIES}")


def make_inputs(shape: Shape, seed: int, device) -> tuple:
    """Each row owns its pages, drawn from a shuffled pool sized for every row at n_ctx plus an eighth
    (a server's fixed page pool: the cache's shape depends on the shape alone, not on the drawn lengths);
    block_table entries past a row's pages are 0."""
    M, N, family = shape["rows"], shape["n_ctx"], shape.get("values", "normal")
    if family not in FAMILIES:
        raise ValueError(f"unknown value family {family!r}; expected one of {FAMILIES}")
    g = generator(seed, device)
    q = torch.randn(M, HEADS, HEAD_DIM, generator=g, device=device)
    if family == "relu":
        q = q.abs()
    q_fp8, q_scale = quantize_fp8(q)
    weights = (torch.randn(M, HEADS, generator=g, device=device) * HEADS ** -0.5) * q_scale[..., 0]
    if shape.get("lengths") == "full":
        lengths = torch.full((M,), N, dtype=torch.int32, device=device)
    else:
        lengths = tc.ragged_lengths(M, N, K, g, device)
    n_pages = (lengths.long() + PAGE - 1) // PAGE
    max_pages = (N + PAGE - 1) // PAGE
    pool = M * max_pages + M * max_pages // 8 + 1
    perm = torch.randperm(pool, generator=g, device=device)
    block_table = torch.zeros(M, max_pages, dtype=torch.int32, device=device)
    starts = torch.cumsum(n_pages, 0) - n_pages
    col = torch.arange(max_pages, device=device)
    live = col[None, :] < n_pages[:, None]
    block_table[live] = perm[(starts[:, None] + col[None, :])[live]].to(torch.int32)
    shared = {"distinct": torch.randn(16, HEAD_DIM, generator=g, device=device),
              "common": torch.randn(1, HEAD_DIM, generator=g, device=device)}
    cache = torch.empty(pool, PAGE, 1, ROW_BYTES, dtype=torch.int8, device=device)
    step = max(1, (1 << 21) // PAGE)  # pages per chunk: 2M tokens of f32 keys at a time
    for p0 in range(0, pool, step):
        p1 = min(pool, p0 + step)
        kf, ks = quantize_fp8(_family_keys(family, (p1 - p0) * PAGE, g, device, shared))
        cache[p0:p1] = pack_pages(kf.view(p1 - p0, PAGE, HEAD_DIM), ks.view(p1 - p0, PAGE))
    return q_fp8.contiguous(), cache, weights.float().contiguous(), lengths, block_table


def row_logits(inputs: tuple, m: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Row m's exact logits (f64: the FP8 products and their 128-term sums are exact there), the bound
    S_t of each (see ACC_EPS) and each token's global id, over its first seq_lens[m] tokens."""
    q, cache, weights, lengths, block_table = inputs
    L = int(lengths[m])
    pages = block_table[m, :(L + PAGE - 1) // PAGE]
    k64, s64 = unpack_pages(cache, pages)
    k64, s64 = k64[:L], s64[:L]
    q64, w64 = q[m].to(torch.float64), weights[m].to(torch.float64)
    logits = (torch.relu(q64 @ k64.t()) * w64[:, None]).sum(0) * s64
    bound = (k64.abs() @ (w64.abs()[:, None] * q64.abs()).sum(0)) * s64  # sum_h |w_h| sum_d |q_hd k_td|, reordered
    gid = (pages.long()[:, None] * PAGE + torch.arange(PAGE, device=pages.device)[None, :]).reshape(-1)[:L]
    return logits, bound, gid


def reference(inputs: tuple) -> dict:
    """Per row: exact logits padded with -inf to the longest row, their bands, and the global id map."""
    q, cache, weights, lengths, block_table = inputs
    M = q.shape[0]
    N = max(1, int(lengths.max())) if M else 1
    dev = q.device
    r = torch.full((M, N), float("-inf"), dtype=torch.float64, device=dev)
    band = torch.zeros(M, N, dtype=torch.float64, device=dev)
    gid = torch.full((M, N), torch.iinfo(torch.int64).max, dtype=torch.int64, device=dev)
    for m in range(M):
        lg, bd, gi = row_logits(inputs, m)
        L = lg.shape[0]
        r[m, :L], band[m, :L], gid[m, :L] = lg, ACC_EPS * bd, gi
    sorted_gid, perm = gid.sort(dim=1)
    return {"logits": r, "band": band, "sorted_gid": sorted_gid, "perm": perm,
            "k_eff": torch.clamp(lengths.long(), max=K)}


def check(output, inputs: tuple, ref: dict) -> tuple[bool, float, str]:
    """Structure (int32 [B, 2048], -1 exactly past each row's length, every other entry a distinct token of
    the row), then the set: the candidate's selection C is accepted iff
        min over C of (I_t + band_t) >= max over the row's other tokens of (I_u - band_u),
    i.e. some perturbation of each logit within its band makes C an exact top-k set (ties included)."""
    q, cache, weights, lengths, block_table = inputs
    M = q.shape[0]
    if type(output) is not torch.Tensor:
        return False, 1.0, f"output is {type(output).__name__}, not a plain torch.Tensor"
    if output.dtype != torch.int32 or tuple(output.shape) != (M, K):
        return False, 1.0, f"output {output.dtype} {tuple(output.shape)}, expected torch.int32 {(M, K)}"
    out = output.to(torch.int64).to(ref["logits"].device)
    pad = out == -1
    k_eff = ref["k_eff"]
    n_pad_bad = pad.sum(1) != (K - k_eff)
    N = ref["logits"].shape[1]
    pos = torch.searchsorted(ref["sorted_gid"], out.clamp(min=0)).clamp(max=N - 1)
    found = ref["sorted_gid"].gather(1, pos) == out
    logical = ref["perm"].gather(1, pos)
    foreign = (~pad) & ~found
    sel = torch.zeros(M, N + 1, dtype=torch.int32, device=out.device)
    sel.scatter_add_(1, torch.where(pad | foreign, N, logical), torch.ones_like(logical, dtype=torch.int32))
    dup = (sel[:, :N] > 1).any(1)
    for name, bad in (("pads (-1) not exactly past the row's length", n_pad_bad),
                      ("an index that is no token of the row", foreign.any(1)), ("duplicate indices", dup)):
        if bool(bad.any()):
            r = int(bad.nonzero()[0, 0])
            return False, 1.0, f"row {r}: {name} (length {int(lengths[r])})"
    r_, b_ = ref["logits"], ref["band"]
    chosen = sel[:, :N] > 0
    inf = torch.full_like(r_, float("inf"))
    low_sel = torch.where(chosen, r_ + b_, inf).amin(1)
    high_out = torch.where(chosen | torch.isinf(r_), -inf, r_ - b_).amax(1)
    gap = torch.where(chosen, r_, inf).amin(1)
    depth = (torch.where(chosen | torch.isinf(r_), -inf, r_).amax(1) - gap).clamp(min=0)
    scale = torch.where(torch.isinf(r_), 0.0, r_.abs()).amax(1).clamp(min=1e-30)
    max_error = float((torch.where(k_eff < lengths.long().to(out.device), depth, 0.0) / scale).max()) if M else 0.0
    bad = (k_eff > 0) & (low_sel < high_out)
    if bool(bad.any()):
        r = int(bad.nonzero()[0, 0])
        return False, max_error, (
            f"row {r}: not a top-{int(k_eff[r])} set: a token left out has exact logit "
            f"{float(high_out[r] + 0):.6g} (less its band) above a chosen one's {float(low_sel[r]):.6g} (plus its "
            f"band); FP8 accumulation order cannot explain a swap wider than {ACC_EPS:g} x sum|terms|")
    return True, max_error, f"top-k set within {ACC_EPS:g} x sum|terms| per token of the exact FP8 logits"


def baseline(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table):
    """Torch, the contract's reference done on the GPU in f32: dequantise each row's pages, q K^T, relu, the
    weighted head sum, masked top-k, then page ids. A row's K is gathered by its page table."""
    M, P = q_index_fp8.shape[0], block_table.shape[1]  # no host sync: the benchmark captures it in a CUDA graph
    dev = q_index_fp8.device
    n = max(P * PAGE, K)
    scores = torch.full((M, n), float("-inf"), dtype=torch.float32, device=dev)
    for m in range(M):
        scores[m, :P * PAGE] = pages_logits_f32(q_index_fp8[m], weights[m], k_index_cache_fp8, block_table[m])
    return global_ids(tc.torch_masked_topk(scores, seq_lens, K), block_table)


def pages_logits_f32(q_row, w_row, cache, pages) -> torch.Tensor:
    """One row's logits over the given pages in f32 torch (64 per page, in page order): dequantise the pages'
    keys and scales, q K^T, relu, the weighted head sum, times each key's scale."""
    rows = cache.view(torch.uint8).reshape(cache.shape[0], PAGE * ROW_BYTES)[pages.long()]
    kv = rows[:, :PAGE * HEAD_DIM].contiguous().view(torch.float8_e4m3fn).to(torch.float32).reshape(-1, HEAD_DIM)
    ks = rows[:, PAGE * HEAD_DIM:].contiguous().view(torch.float32).reshape(-1)
    return (torch.relu(q_row.to(torch.float32) @ kv.t()) * w_row[:, None]).sum(0) * ks


def global_ids(local: torch.Tensor, block_table: torch.Tensor) -> torch.Tensor:
    """Logical positions [B, k] (-1 padded) -> the contract's output: page id x 64 + offset, -1 kept."""
    local = local.long()
    page = block_table.long().gather(1, (local.clamp(min=0) // PAGE).clamp(max=max(block_table.shape[1] - 1, 0)))
    return torch.where(local >= 0, page * PAGE + local.clamp(min=0) % PAGE, -1).to(torch.int32)


def output_spec(shape: Shape):
    return [((shape["rows"], K), torch.int32)]


def bytes_min(shape: Shape) -> int:
    """Every row reads its own pages: rows x n_ctx x 132 bytes dominate."""
    M, N = shape["rows"], shape["n_ctx"]
    return M * HEADS * HEAD_DIM + M * N * ROW_BYTES + 4 * M * HEADS + 4 * M + 4 * M * (N // PAGE) + 4 * M * K


def flops(shape: Shape) -> int:
    M, N = shape["rows"], shape["n_ctx"]
    return 2 * M * N * HEADS * HEAD_DIM + 3 * M * N * HEADS


TARGET = TargetSpec.of(INFO, globals(), canonical=tc.canonical, gpu_shapes=GPU_SHAPES, cpu_shapes=CPU_SHAPES,
                       cpu_first_call_only=(_shape(1, 140000, "near_bf16"), _shape(128, 2100, "relu")))
