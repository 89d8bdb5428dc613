"""dsa_indexer_topk best (= best_v6.py with TK_BLOCK 1024, TK_TARGET_CTAS 1024, TK_WARPS 4; H200 round 2:
362 us at M=64 x 128K vs 375 us with best_v6.py's TK params and 705 us for best_prev.py).
best_v6 (round 2): the logits kernel of best_v3.py (f32 logits [M, N] written once) + the
exact top-k of dsa_topk/best_v6.py (4 launches, no memset; see that file's docstring; the kernels are
copied here because a candidate is one file).
"""
import torch
import triton
import triton.language as tl

PARAMS = {"ROWS": 4, "BLOCK_N": 64, "N_PER_PROG": 4096, "TRANS": 1, "num_warps": 8, "num_stages": 3,
          "TK_BLOCK": 1024, "TK_TARGET_CTAS": 1024, "TK_WARPS": 4,
          "TK_SEL_BLOCK": 2048, "TK_SEL_WARPS": 8, "TK_L1_BITS": 6, "TK_MAX_C": 64}
SPACE = {"ROWS": [1, 2, 4], "BLOCK_N": [64, 128, 256], "N_PER_PROG": [1024, 2048, 4096, 8192], "TRANS": [0, 1],
         "num_warps": [4, 8], "num_stages": [2, 3, 4], "TK_BLOCK": [1024, 2048, 4096],
         "TK_TARGET_CTAS": [264, 512, 1024], "TK_WARPS": [4, 8, 16],
         "TK_SEL_BLOCK": [1024, 2048, 4096], "TK_SEL_WARPS": [4, 8, 16], "TK_L1_BITS": [5, 6, 7, 8], "TK_MAX_C": [16, 32, 64, 128]}

H_IDX = 64
D_IDX = 128


@triton.jit
def _logits_kernel(q_ptr, k_ptr, w_ptr, len_ptr, out_ptr, stride_om, M, s0, cw,
                   H: tl.constexpr, D: tl.constexpr, ROWS: tl.constexpr, BLOCK_N: tl.constexpr,
                   N_PER_PROG: tl.constexpr, TRANS: tl.constexpr, UPCAST: tl.constexpr):
    """out[m, j] = I[m, s0 + j] for j < cw (only up to the longest row of this program)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    RH: tl.constexpr = ROWS * H
    qr = pid_m * RH + tl.arange(0, RH)
    qm = qr < M * H
    dd = tl.arange(0, D)
    q = tl.load(q_ptr + qr.to(tl.int64)[:, None] * D + dd[None, :], mask=qm[:, None], other=0.0)
    if UPCAST:  # CPU interpreter only: its bf16 tl.dot is wrong; bf16 products are exact in f32
        q = q.to(tl.float32)
    w = tl.load(w_ptr + qr, mask=qm, other=0.0)
    mrows = pid_m * ROWS + tl.arange(0, ROWS)
    mm = mrows < M
    lmax = tl.max(tl.load(len_ptr + mrows, mask=mm, other=0), 0)
    n_lo = pid_n * N_PER_PROG
    n_hi = tl.minimum(tl.minimum(n_lo + N_PER_PROG, cw), lmax - s0)
    if TRANS:
        qt = tl.trans(q)
    for n0 in range(n_lo, n_hi, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        nm = offs_n < n_hi
        kb = tl.load(k_ptr + (s0 + offs_n).to(tl.int64)[:, None] * D + dd[None, :], mask=nm[:, None], other=0.0)
        if UPCAST:
            kb = kb.to(tl.float32)
        if TRANS:
            s = tl.dot(kb, qt)                                   # [BLOCK_N, RH]
            s = tl.maximum(s, 0.0) * w[None, :]
            if ROWS == 1:
                lg = tl.sum(s, 1)[None, :]
            else:
                lg = tl.trans(tl.sum(tl.reshape(s, [BLOCK_N, ROWS, H]), 2))
        else:
            s = tl.dot(q, tl.trans(kb))                          # [RH, BLOCK_N]
            s = tl.maximum(s, 0.0) * w[:, None]
            if ROWS == 1:
                lg = tl.sum(s, 0)[None, :]
            else:
                lg = tl.sum(tl.reshape(s, [ROWS, H, BLOCK_N]), 1)
        optr = out_ptr + mrows.to(tl.int64)[:, None] * stride_om + offs_n[None, :]
        tl.store(optr, lg, mask=mm[:, None] & nm[None, :])


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



def forward(q, k_index, weights, lengths, k):
    assert q.dtype == torch.bfloat16 and k_index.dtype == torch.bfloat16
    M, H, D = q.shape
    assert H == H_IDX and D == D_IDX
    N = k_index.shape[0]
    q = q.contiguous()
    k_index = k_index.contiguous()
    weights = weights.to(torch.float32).contiguous()
    lengths = lengths.to(torch.int32).contiguous()
    dev = q.device
    p = PARAMS
    out = torch.empty((M, k), dtype=torch.int32, device=dev)
    if M == 0 or k == 0:
        return out
    if N == 0:
        out.fill_(-1)
        return out
    logits = torch.empty((M, N), dtype=torch.float32, device=dev)
    ROWS = p["ROWS"]
    grid = (triton.cdiv(M, ROWS), triton.cdiv(N, p["N_PER_PROG"]))
    _logits_kernel[grid](q, k_index, weights, lengths, logits, N, M, 0, N,
                         H=H, D=D, ROWS=ROWS, BLOCK_N=p["BLOCK_N"], N_PER_PROG=p["N_PER_PROG"],
                         TRANS=p["TRANS"], UPCAST=dev.type == "cpu", num_warps=p["num_warps"],
                         num_stages=p["num_stages"])
    return _topk_v6(logits, lengths, k, out, p["TK_BLOCK"], p["TK_TARGET_CTAS"], p["TK_WARPS"], p["TK_SEL_BLOCK"],
                    p["TK_SEL_WARPS"], p["TK_L1_BITS"], p["TK_MAX_C"])
