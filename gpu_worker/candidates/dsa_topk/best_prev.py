"""dsa_topk best (v2): split-row histogram on the top byte, compaction, then a small per-row select.

forward(logits f32[M, N], lengths int32[M], k) -> int32[M, k]

Keys: f32 -> order-preserving uint32 (-0.0 folded onto +0.0). Three launches (+ one memset):
  K1 grid (M, C): each program histograms the top 8 bits of the keys of its chunk (256-bin
     tl.histogram: Triton's histogram costs ~bins/32 ops per element and thread, so 2048 bins, as in
     best_v1_hist2048.py, was ~8x slower), stores its own suffix sums (per-chunk table, 257 ints) and
     adds its histogram into the row's global histogram (atomics, non-zero bins only).
  K2 grid (M, C): each program derives the row's top-byte bin b1 (the bin holding the k-th key),
     gets its output offsets from the per-chunk tables of the chunks before it, writes the indices
     of its keys with top byte > b1 straight to the output, and copies (key, index) of its keys
     with top byte == b1 into a per-row candidate buffer, in position order.
  K3 grid (M,): one program per row finishes the select on the E candidates only (3 x 8-bit
     histogram passes, then a gather), writes the rest of the selection and the -1 padding.
Deterministic (every write position comes from counts, not atomics), exact as a set, no cap on a
tie bucket (E can be N; K3 then reads N keys 4 times on one SM: slower, still right).
Memory: int32 gh [M, 256], per-chunk table [M, C, 257], candidate keys + indices [M, N] each
(allocated at full size, only E entries per row written).
"""
import torch
import triton
import triton.language as tl

# measured best of the run-2 sweep on the H200 (M=64: 115.3 us, M=4: 35.1 us; defaults before: 129.0 / 35.8)
PARAMS = {"BLOCK": 1024, "TARGET_CTAS": 1024, "num_warps": 4, "SEL_BLOCK": 2048, "SEL_WARPS": 8}
SPACE = {"BLOCK": [1024, 2048, 4096], "TARGET_CTAS": [264, 512, 1024], "num_warps": [4, 8, 16],
         "SEL_BLOCK": [1024, 2048, 4096], "SEL_WARPS": [4, 8, 16]}


@triton.jit
def _key(x):
    b = x.to(tl.int32, bitcast=True)
    b = tl.where(x == 0.0, 0, b)
    kk = b ^ ((b >> 31) | -2147483648)
    return kk.to(tl.uint32, bitcast=True)


@triton.jit
def _row_len(len_ptr, row, N, K):
    L = tl.minimum(tl.maximum(tl.load(len_ptr + row), 0), N)
    return L, tl.minimum(K, L)


@triton.jit
def _pick(hist, k_rem, NB: tl.constexpr):
    bins = tl.arange(0, NB)
    ge = tl.cumsum(hist, 0, reverse=True)
    dsel = tl.max(tl.where(ge >= k_rem, bins, 0), 0)
    gt = tl.sum(tl.where(bins > dsel, hist, 0), 0)
    cnt = tl.sum(tl.where(bins == dsel, hist, 0), 0)
    return dsel, k_rem - gt, cnt


@triton.jit
def _k1_hist(x_ptr, stride_x, len_ptr, gh_ptr, cge_ptr, N, K, CH, C, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.program_id(1)
    x_row = x_ptr + row.to(tl.int64) * stride_x
    L, k_eff = _row_len(len_ptr, row, N, K)
    lo = c * CH
    hi = tl.minimum(lo + CH, L)
    hist = tl.zeros([256], dtype=tl.int32)
    for start in range(lo, hi, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < hi
        key = _key(tl.load(x_row + offs, mask=m, other=0.0))
        hist += tl.histogram((key >> 24).to(tl.int32), 256, mask=m)
    bins = tl.arange(0, 256)
    tl.atomic_add(gh_ptr + row * 256 + bins, hist, mask=hist > 0, sem="relaxed")
    base = cge_ptr + (row * C + c).to(tl.int64) * 257
    tl.store(base + bins, tl.cumsum(hist, 0, reverse=True))
    tl.store(base + 256, 0)


@triton.jit
def _k2_compact(x_ptr, stride_x, len_ptr, gh_ptr, cge_ptr, out_ptr, stride_o, ckey_ptr, cidx_ptr,
                N, K, CH, C, BLOCK: tl.constexpr, CB: tl.constexpr):
    row = tl.program_id(0)
    c = tl.program_id(1)
    x_row = x_ptr + row.to(tl.int64) * stride_x
    o_row = out_ptr + row.to(tl.int64) * stride_o
    ck_row = ckey_ptr + row.to(tl.int64) * N
    ci_row = cidx_ptr + row.to(tl.int64) * N
    L, k_eff = _row_len(len_ptr, row, N, K)
    b1, k_rem, cnt = _pick(tl.load(gh_ptr + row * 256 + tl.arange(0, 256)), k_eff, 256)
    cs = tl.arange(0, CB)
    cm = cs < c
    cbase = cge_ptr + (row * C + cs).to(tl.int64) * 257
    g_before = tl.load(cbase + b1 + 1, mask=cm, other=0)
    ge_before = tl.load(cbase + b1, mask=cm, other=0)
    cnt_gt = tl.sum(g_before, 0)
    cnt_eq = tl.sum(ge_before - g_before, 0)
    lo = c * CH
    hi = tl.minimum(lo + CH, L)
    for start in range(lo, hi, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < hi
        key = _key(tl.load(x_row + offs, mask=m, other=0.0))
        top = (key >> 24).to(tl.int32)
        is_gt = m & (top > b1)
        is_eq = m & (top == b1)
        cg = tl.cumsum(is_gt.to(tl.int32), 0)
        ce = tl.cumsum(is_eq.to(tl.int32), 0)
        tl.store(o_row + cnt_gt + cg - 1, offs, mask=is_gt)
        pe = cnt_eq + ce - 1
        tl.store(ck_row + pe, key.to(tl.int32, bitcast=True), mask=is_eq)
        tl.store(ci_row + pe, offs, mask=is_eq)
        cnt_gt += tl.sum(is_gt.to(tl.int32), 0)
        cnt_eq += tl.sum(is_eq.to(tl.int32), 0)


@triton.jit
def _sel_pass(ck_row, E, k_rem, prefix, pmask, SHIFT: tl.constexpr, BLOCK: tl.constexpr):
    hist = tl.zeros([256], dtype=tl.int32)
    for start in range(0, E, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < E
        key = tl.load(ck_row + offs, mask=m, other=0).to(tl.uint32, bitcast=True)
        d = ((key >> SHIFT) & 255).to(tl.int32)
        hist += tl.histogram(d, 256, mask=m & ((key & pmask) == prefix))
    dsel, k_rem, cnt = _pick(hist, k_rem, 256)
    prefix = prefix | (dsel.to(tl.uint32) << SHIFT)
    pmask = pmask | tl.full([], 255 << SHIFT, tl.uint32)
    return k_rem, prefix, pmask


@triton.jit
def _k3_select(len_ptr, gh_ptr, out_ptr, stride_o, ckey_ptr, cidx_ptr, N, K,
               BLOCK: tl.constexpr, KBLOCK: tl.constexpr):
    row = tl.program_id(0)
    o_row = out_ptr + row.to(tl.int64) * stride_o
    ck_row = ckey_ptr + row.to(tl.int64) * N
    ci_row = cidx_ptr + row.to(tl.int64) * N
    L, k_eff = _row_len(len_ptr, row, N, K)
    b1, k_rem, E = _pick(tl.load(gh_ptr + row * 256 + tl.arange(0, 256)), k_eff, 256)
    n_gt1 = k_eff - k_rem
    prefix = b1.to(tl.uint32) << 24
    pmask = tl.full([], 0xFF000000, tl.uint32)
    k_rem2, prefix, pmask = _sel_pass(ck_row, E, k_rem, prefix, pmask, 16, BLOCK)
    k_rem2, prefix, pmask = _sel_pass(ck_row, E, k_rem2, prefix, pmask, 8, BLOCK)
    k_rem2, prefix, pmask = _sel_pass(ck_row, E, k_rem2, prefix, pmask, 0, BLOCK)
    thr = prefix
    need_eq = k_rem2
    base_gt = n_gt1
    base_eq = n_gt1 + (k_rem - k_rem2)
    cnt_gt = 0
    cnt_eq = 0
    for start in range(0, E, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < E
        key = tl.load(ck_row + offs, mask=m, other=0).to(tl.uint32, bitcast=True)
        idx = tl.load(ci_row + offs, mask=m, other=0)
        is_gt = m & (key > thr)
        is_eq = m & (key == thr)
        cg = tl.cumsum(is_gt.to(tl.int32), 0)
        ce = tl.cumsum(is_eq.to(tl.int32), 0)
        tl.store(o_row + base_gt + cnt_gt + cg - 1, idx, mask=is_gt)
        take = is_eq & (cnt_eq + ce <= need_eq)
        tl.store(o_row + base_eq + cnt_eq + ce - 1, idx, mask=take)
        cnt_gt += tl.sum(is_gt.to(tl.int32), 0)
        cnt_eq += tl.sum(is_eq.to(tl.int32), 0)
    for start in range(0, K, KBLOCK):
        offs = start + tl.arange(0, KBLOCK)
        tl.store(o_row + offs, tl.full([KBLOCK], -1, tl.int32), mask=(offs >= k_eff) & (offs < K))


def forward(logits, lengths, k):
    assert logits.dim() == 2 and logits.dtype == torch.float32
    M, N = logits.shape
    logits = logits.contiguous()
    lengths = lengths.to(torch.int32).contiguous()
    dev = logits.device
    out = torch.empty((M, k), dtype=torch.int32, device=dev)
    if M == 0 or k == 0:
        return out
    p = PARAMS
    BLOCK = p["BLOCK"]
    nblk = triton.cdiv(max(N, 1), BLOCK)
    C = max(1, min(nblk, triton.cdiv(p["TARGET_CTAS"], M)))
    CH = triton.cdiv(nblk, C) * BLOCK
    C = triton.cdiv(max(N, 1), CH)
    gh = torch.zeros((M, 256), dtype=torch.int32, device=dev)
    cge = torch.empty((M, C, 257), dtype=torch.int32, device=dev)
    ckey = torch.empty((M, max(N, 1)), dtype=torch.int32, device=dev)
    cidx = torch.empty((M, max(N, 1)), dtype=torch.int32, device=dev)
    grid = (M, C)
    _k1_hist[grid](logits, logits.stride(0), lengths, gh, cge, N, k, CH, C, BLOCK=BLOCK, num_warps=p["num_warps"])
    _k2_compact[grid](logits, logits.stride(0), lengths, gh, cge, out, out.stride(0), ckey, cidx, N, k, CH, C,
                      BLOCK=BLOCK, CB=max(2, triton.next_power_of_2(C)), num_warps=p["num_warps"])
    _k3_select[(M,)](lengths, gh, out, out.stride(0), ckey, cidx, N, k,
                     BLOCK=p["SEL_BLOCK"], KBLOCK=1024, num_warps=p["SEL_WARPS"])
    return out
