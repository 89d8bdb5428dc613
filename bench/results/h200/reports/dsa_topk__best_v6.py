"""dsa_topk best (= best_v6.py; H200 round 2, randn: 106 us at M=64, 33 us at M=4, 69 us at M=32 x 128K;
best_prev.py (v2) 116 / 36 / 74 us).
best_v6 (round 2): best_v5 with no memset and the level-2 histogram fused into K2.

forward(logits f32[M, N], lengths int32[M], k) -> int32[M, k]

Same select as best_v5.py (64-bin first level on key >> 26, histogram-free packed-scan compaction,
a second split-row round on the next 8 bits, all-equal fast path in the one-CTA tail), 4 launches:
  K1  grid (M, C): NB1-bin histogram per chunk -> suffix table t1 only (no atomics, so no memset);
      program c == 0 zeroes the row's level-2 histogram and OR words (used from K2 on).
  K2  grid (M, C): each program sums the row histogram from t1 ([C, NB1] tile; C <= MAX_C), picks
      b1 (c == 0 stores the row histogram for K3/K4), compacts as in v5, then (after a CTA barrier)
      histograms the next 8 bits over the candidates it has just written (its own cand1 range).
  K3, K4 as best_v5.
Deterministic (all positions from counts), exact as a set, no tie cap.
"""
import torch
import triton
import triton.language as tl

PARAMS = {"BLOCK": 1024, "TARGET_CTAS": 1024, "num_warps": 4, "SEL_BLOCK": 2048, "SEL_WARPS": 8, "L1_BITS": 6, "MAX_C": 64}
SPACE = {"BLOCK": [1024, 2048, 4096], "TARGET_CTAS": [264, 512, 1024], "num_warps": [4, 8, 16],
         "SEL_BLOCK": [1024, 2048, 4096], "SEL_WARPS": [4, 8, 16], "L1_BITS": [5, 6, 7, 8], "MAX_C": [16, 32, 64, 128]}


@triton.jit
def _key(x):
    b = x.to(tl.int32, bitcast=True)
    b = tl.where(x == 0.0, 0, b)
    kk = b ^ ((b >> 31) | -2147483648)
    return kk.to(tl.uint32, bitcast=True)


@triton.jit
def _or_fn(a, b):
    return a | b


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
def _row_hist(t1_ptr, row, C, CB: tl.constexpr, NB1: tl.constexpr):
    cc = tl.arange(0, CB)[:, None]
    bb = tl.arange(0, NB1)[None, :]
    base = t1_ptr + (row * C + cc).to(tl.int64) * (NB1 + 1)
    msk = (cc < C) & (bb >= 0)
    ge = tl.load(base + bb, mask=msk, other=0)
    gn = tl.load(base + bb + 1, mask=msk, other=0)
    return tl.sum(ge - gn, 0)


@triton.jit
def _k1_hist(x_ptr, stride_x, len_ptr, t1_ptr, gh2_ptr, eqf_ptr, N, K, CH, C, BLOCK: tl.constexpr,
             NB1: tl.constexpr, S1: tl.constexpr):
    row = tl.program_id(0)
    c = tl.program_id(1)
    x_row = x_ptr + row.to(tl.int64) * stride_x
    L, k_eff = _row_len(len_ptr, row, N, K)
    lo = c * CH
    hi = tl.minimum(lo + CH, L)
    hist = tl.zeros([NB1], dtype=tl.int32)
    for start in range(lo, hi, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < hi
        key = _key(tl.load(x_row + offs, mask=m, other=0.0))
        hist += tl.histogram((key >> S1).to(tl.int32), NB1, mask=m)
    bins = tl.arange(0, NB1)
    b256 = tl.arange(0, 256)
    tl.store(gh2_ptr + row * 256 + b256, tl.zeros([256], dtype=tl.int32), mask=b256 < tl.where(c == 0, 256, 0))
    b2_ = tl.arange(0, 2)
    tl.store(eqf_ptr + row * 2 + b2_, tl.zeros([2], dtype=tl.int32), mask=b2_ < tl.where(c == 0, 2, 0))
    base = t1_ptr + (row * C + c).to(tl.int64) * (NB1 + 1)
    tl.store(base + bins, tl.cumsum(hist, 0, reverse=True))
    tl.store(base + NB1, 0)


@triton.jit
def _k2_compact(x_ptr, stride_x, len_ptr, gh1_ptr, t1_ptr, gh2_ptr, t2_ptr, out_ptr, stride_o, ck_ptr, ci_ptr,
                N, K, CH, C, BLOCK: tl.constexpr, CB: tl.constexpr, NB1: tl.constexpr, S1: tl.constexpr,
                S2: tl.constexpr):
    row = tl.program_id(0)
    c = tl.program_id(1)
    x_row = x_ptr + row.to(tl.int64) * stride_x
    o_row = out_ptr + row.to(tl.int64) * stride_o
    ck_row = ck_ptr + row.to(tl.int64) * N
    ci_row = ci_ptr + row.to(tl.int64) * N
    L, k_eff = _row_len(len_ptr, row, N, K)
    hist1 = _row_hist(t1_ptr, row, C, CB, NB1)
    bins1 = tl.arange(0, NB1)
    tl.store(gh1_ptr + row * NB1 + bins1, hist1, mask=bins1 < tl.where(c == 0, NB1, 0))
    b1, k_rem, cnt = _pick(hist1, k_eff, NB1)
    cs_ = tl.arange(0, CB)
    cm = cs_ < c
    cbase = t1_ptr + (row * C + cs_).to(tl.int64) * (NB1 + 1)
    g_before = tl.load(cbase + b1 + 1, mask=cm, other=0)
    ge_before = tl.load(cbase + b1, mask=cm, other=0)
    cnt_gt = tl.sum(g_before, 0)
    cnt_eq = tl.sum(ge_before - g_before, 0)
    e_lo = cnt_eq
    lo = c * CH
    hi = tl.minimum(lo + CH, L)
    for start in range(lo, hi, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < hi
        key = _key(tl.load(x_row + offs, mask=m, other=0.0))
        top = (key >> S1).to(tl.int32)
        is_gt = m & (top > b1)
        is_eq = m & (top == b1)
        v = is_gt.to(tl.int32) + (is_eq.to(tl.int32) << 16)
        cs = tl.cumsum(v, 0)
        cg = cs & 65535
        ce = cs >> 16
        tl.store(o_row + cnt_gt + cg - 1, offs, mask=is_gt)
        pe = cnt_eq + ce - 1
        tl.store(ck_row + pe, key.to(tl.int32, bitcast=True), mask=is_eq)
        tl.store(ci_row + pe, offs, mask=is_eq)
        tot = tl.sum(v, 0)
        cnt_gt += tot & 65535
        cnt_eq += tot >> 16
    # level-2 histogram over the candidates this CTA has just written (bar.sync: visible to the CTA)
    tl.debug_barrier()
    hist = tl.zeros([256], dtype=tl.int32)
    for start in range(e_lo, cnt_eq, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < cnt_eq
        key = tl.load(ck_row + offs, mask=m, other=0).to(tl.uint32, bitcast=True)
        hist += tl.histogram(((key >> S2) & 255).to(tl.int32), 256, mask=m)
    bins = tl.arange(0, 256)
    tl.atomic_add(gh2_ptr + row * 256 + bins, hist, mask=hist > 0, sem="relaxed")
    base = t2_ptr + (row * C + c).to(tl.int64) * 257
    tl.store(base + bins, tl.cumsum(hist, 0, reverse=True))
    tl.store(base + 256, 0)


@triton.jit
def _cand1_range(t1_ptr, row, c, C, b1, CB: tl.constexpr, NB1: tl.constexpr):
    cs_ = tl.arange(0, CB)
    cm = cs_ < c
    t1b = t1_ptr + (row * C + cs_).to(tl.int64) * (NB1 + 1)
    e_before = tl.sum(tl.load(t1b + b1, mask=cm, other=0) - tl.load(t1b + b1 + 1, mask=cm, other=0), 0)
    t1c = t1_ptr + (row * C + c).to(tl.int64) * (NB1 + 1)
    e_here = tl.load(t1c + b1) - tl.load(t1c + b1 + 1)
    return e_before, e_before + e_here


@triton.jit
def _k3_compact(len_ptr, gh1_ptr, t1_ptr, gh2_ptr, t2_ptr, eqf_ptr, out_ptr, stride_o, ck_ptr, ci_ptr, ck2_ptr,
                ci2_ptr, N, K, C, BLOCK: tl.constexpr, CB: tl.constexpr, NB1: tl.constexpr, S2: tl.constexpr):
    row = tl.program_id(0)
    c = tl.program_id(1)
    o_row = out_ptr + row.to(tl.int64) * stride_o
    ck_row = ck_ptr + row.to(tl.int64) * N
    ci_row = ci_ptr + row.to(tl.int64) * N
    ck2_row = ck2_ptr + row.to(tl.int64) * N
    ci2_row = ci2_ptr + row.to(tl.int64) * N
    L, k_eff = _row_len(len_ptr, row, N, K)
    b1, k_rem1, cnt = _pick(tl.load(gh1_ptr + row * NB1 + tl.arange(0, NB1)), k_eff, NB1)
    n_gt1 = k_eff - k_rem1
    b2, k_rem2, cnt2 = _pick(tl.load(gh2_ptr + row * 256 + tl.arange(0, 256)), k_rem1, 256)
    lo, hi = _cand1_range(t1_ptr, row, c, C, b1, CB, NB1)
    cs_ = tl.arange(0, CB)
    cm = cs_ < c
    t2b = t2_ptr + (row * C + cs_).to(tl.int64) * 257
    g2 = tl.load(t2b + b2 + 1, mask=cm, other=0)
    ge2 = tl.load(t2b + b2, mask=cm, other=0)
    cnt_gt = tl.sum(g2, 0)
    cnt_eq = tl.sum(ge2 - g2, 0)
    acc_or = tl.zeros([BLOCK], dtype=tl.int32)
    acc_nor = tl.zeros([BLOCK], dtype=tl.int32)
    for start in range(lo, hi, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < hi
        key = tl.load(ck_row + offs, mask=m, other=0).to(tl.uint32, bitcast=True)
        idx = tl.load(ci_row + offs, mask=m, other=0)
        d2 = ((key >> S2) & 255).to(tl.int32)
        is_gt = m & (d2 > b2)
        is_eq = m & (d2 == b2)
        v = is_gt.to(tl.int32) + (is_eq.to(tl.int32) << 16)
        cs = tl.cumsum(v, 0)
        cg = cs & 65535
        ce = cs >> 16
        tl.store(o_row + n_gt1 + cnt_gt + cg - 1, idx, mask=is_gt)
        pe = cnt_eq + ce - 1
        ki = key.to(tl.int32, bitcast=True)
        tl.store(ck2_row + pe, ki, mask=is_eq)
        tl.store(ci2_row + pe, idx, mask=is_eq)
        acc_or |= tl.where(is_eq, ki, 0)
        acc_nor |= tl.where(is_eq, ~ki, 0)
        tot = tl.sum(v, 0)
        cnt_gt += tot & 65535
        cnt_eq += tot >> 16
    r_or = tl.reduce(acc_or, 0, _or_fn)
    r_nor = tl.reduce(acc_nor, 0, _or_fn)
    tl.atomic_or(eqf_ptr + row * 2, r_or, mask=r_or != 0, sem="relaxed")
    tl.atomic_or(eqf_ptr + row * 2 + 1, r_nor, mask=r_nor != 0, sem="relaxed")


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
def _k4_select(len_ptr, gh1_ptr, gh2_ptr, eqf_ptr, out_ptr, stride_o, ck2_ptr, ci2_ptr, N, K,
               BLOCK: tl.constexpr, KBLOCK: tl.constexpr, NB1: tl.constexpr, S1: tl.constexpr,
               S2: tl.constexpr, PMASK2: tl.constexpr):
    row = tl.program_id(0)
    o_row = out_ptr + row.to(tl.int64) * stride_o
    ck_row = ck2_ptr + row.to(tl.int64) * N
    ci_row = ci2_ptr + row.to(tl.int64) * N
    L, k_eff = _row_len(len_ptr, row, N, K)
    b1, k_rem1, E1 = _pick(tl.load(gh1_ptr + row * NB1 + tl.arange(0, NB1)), k_eff, NB1)
    b2, k_rem2, E = _pick(tl.load(gh2_ptr + row * 256 + tl.arange(0, 256)), k_rem1, 256)
    base_gt = k_eff - k_rem2
    all_eq = (tl.load(eqf_ptr + row * 2) & tl.load(eqf_ptr + row * 2 + 1)) == 0
    if all_eq:
        for start in range(0, k_rem2, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            m = offs < k_rem2
            tl.store(o_row + base_gt + offs, tl.load(ci_row + offs, mask=m, other=0), mask=m)
    else:
        prefix = (b1.to(tl.uint32) << S1) | (b2.to(tl.uint32) << S2)
        pmask = tl.full([], PMASK2, tl.uint32)
        k_rem3, prefix, pmask = _sel_pass(ck_row, E, k_rem2, prefix, pmask, S2 - 8, BLOCK)
        if S2 > 16:
            k_rem3, prefix, pmask = _sel_pass(ck_row, E, k_rem3, prefix, pmask, S2 - 16, BLOCK)
            k_rem3, prefix, pmask = _sel_pass(ck_row, E, k_rem3, prefix, pmask, 0, BLOCK)
        else:
            k_rem3, prefix, pmask = _sel_pass(ck_row, E, k_rem3, prefix, pmask, 0, BLOCK)
        thr = prefix
        need_eq = k_rem3
        base_eq = base_gt + (k_rem2 - k_rem3)
        cnt_gt = 0
        cnt_eq = 0
        for start in range(0, E, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            m = offs < E
            key = tl.load(ck_row + offs, mask=m, other=0).to(tl.uint32, bitcast=True)
            idx = tl.load(ci_row + offs, mask=m, other=0)
            is_gt = m & (key > thr)
            is_eq = m & (key == thr)
            v = is_gt.to(tl.int32) + (is_eq.to(tl.int32) << 16)
            cs = tl.cumsum(v, 0)
            cg = cs & 65535
            ce = cs >> 16
            tl.store(o_row + base_gt + cnt_gt + cg - 1, idx, mask=is_gt)
            take = is_eq & (cnt_eq + ce <= need_eq)
            tl.store(o_row + base_eq + cnt_eq + ce - 1, idx, mask=take)
            tot = tl.sum(v, 0)
            cnt_gt += tot & 65535
            cnt_eq += tot >> 16
    for start in range(0, K, KBLOCK):
        offs = start + tl.arange(0, KBLOCK)
        tl.store(o_row + offs, tl.full([KBLOCK], -1, tl.int32), mask=(offs >= k_eff) & (offs < K))


def _topk_v6(logits, lengths, k, out, BLOCK, TARGET_CTAS, WARPS, SEL_BLOCK, SEL_WARPS, L1_BITS, MAX_C):
    M, N = logits.shape
    dev = logits.device
    assert BLOCK <= 32768 and SEL_BLOCK <= 32768  # packed 16-bit counts
    assert 5 <= L1_BITS <= 8
    NB1 = 1 << L1_BITS
    S1 = 32 - L1_BITS
    S2 = S1 - 8
    PMASK2 = (0xFFFFFFFF << S2) & 0xFFFFFFFF
    nblk = triton.cdiv(max(N, 1), BLOCK)
    C = max(1, min(nblk, triton.cdiv(TARGET_CTAS, M), MAX_C))
    CH = triton.cdiv(nblk, C) * BLOCK
    C = triton.cdiv(max(N, 1), CH)
    CB = max(2, triton.next_power_of_2(C))
    ws = torch.empty(M * (NB1 + 256 + 2), dtype=torch.int32, device=dev)   # no memset: K1/K2 initialise
    gh1 = ws[: M * NB1]
    gh2 = ws[M * NB1: M * (NB1 + 256)]
    eqf = ws[M * (NB1 + 256):]
    t1 = torch.empty((M, C, NB1 + 1), dtype=torch.int32, device=dev)
    t2 = torch.empty((M, C, 257), dtype=torch.int32, device=dev)
    cand = torch.empty((4, M, max(N, 1)), dtype=torch.int32, device=dev)
    grid = (M, C)
    sx = logits.stride(0)
    _k1_hist[grid](logits, sx, lengths, t1, gh2, eqf, N, k, CH, C, BLOCK=BLOCK, NB1=NB1, S1=S1, num_warps=WARPS)
    _k2_compact[grid](logits, sx, lengths, gh1, t1, gh2, t2, out, out.stride(0), cand[0], cand[1], N, k, CH, C,
                      BLOCK=BLOCK, CB=CB, NB1=NB1, S1=S1, S2=S2, num_warps=WARPS)
    _k3_compact[grid](lengths, gh1, t1, gh2, t2, eqf, out, out.stride(0), cand[0], cand[1], cand[2], cand[3],
                      N, k, C, BLOCK=BLOCK, CB=CB, NB1=NB1, S2=S2, num_warps=WARPS)
    _k4_select[(M,)](lengths, gh1, gh2, eqf, out, out.stride(0), cand[2], cand[3], N, k,
                     BLOCK=SEL_BLOCK, KBLOCK=1024, NB1=NB1, S1=S1, S2=S2, PMASK2=PMASK2, num_warps=SEL_WARPS)
    return out


def forward(logits, lengths, k):
    assert logits.dim() == 2 and logits.dtype == torch.float32
    M, N = logits.shape
    logits = logits.contiguous()
    lengths = lengths.to(torch.int32).contiguous()
    out = torch.empty((M, k), dtype=torch.int32, device=logits.device)
    if M == 0 or k == 0:
        return out
    p = PARAMS
    return _topk_v6(logits, lengths, k, out, p["BLOCK"], p["TARGET_CTAS"], p["num_warps"], p["SEL_BLOCK"],
                    p["SEL_WARPS"], p.get("L1_BITS", 6), p.get("MAX_C", 64))
