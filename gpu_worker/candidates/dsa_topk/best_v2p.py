"""dsa_topk best_v2p: best.py (v2: top-byte split-row compaction + one-CTA finish) with packed scans
and an all-equal fast path (round 2).

  - K2 and K3's gather do ONE block cumsum on a packed int32 (gt count low 16 bits, eq count high
    16 bits; BLOCK <= 32768) instead of two.
  - K2 ORs the keys it copies (and their complements) into two row words (atomic_or); if
    OR(key) & OR(~key) == 0 every candidate is the k-th value (ReLU logits: k-th = 0.0 with ~N
    zeros), and K3 copies the first k_rem candidate indices instead of 3 histogram passes + a scan.
Same launches as best.py (memset + 3 kernels). Deterministic, exact as a set.
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
def _k2_compact(x_ptr, stride_x, len_ptr, gh_ptr, cge_ptr, eqf_ptr, out_ptr, stride_o, ckey_ptr, cidx_ptr,
                N, K, CH, C, BLOCK: tl.constexpr, CB: tl.constexpr):
    row = tl.program_id(0)
    c = tl.program_id(1)
    x_row = x_ptr + row.to(tl.int64) * stride_x
    o_row = out_ptr + row.to(tl.int64) * stride_o
    ck_row = ckey_ptr + row.to(tl.int64) * N
    ci_row = cidx_ptr + row.to(tl.int64) * N
    L, k_eff = _row_len(len_ptr, row, N, K)
    b1, k_rem, cnt = _pick(tl.load(gh_ptr + row * 256 + tl.arange(0, 256)), k_eff, 256)
    cs_ = tl.arange(0, CB)
    cm = cs_ < c
    cbase = cge_ptr + (row * C + cs_).to(tl.int64) * 257
    g_before = tl.load(cbase + b1 + 1, mask=cm, other=0)
    ge_before = tl.load(cbase + b1, mask=cm, other=0)
    cnt_gt = tl.sum(g_before, 0)
    cnt_eq = tl.sum(ge_before - g_before, 0)
    lo = c * CH
    hi = tl.minimum(lo + CH, L)
    acc_or = tl.zeros([BLOCK], dtype=tl.int32)
    acc_nor = tl.zeros([BLOCK], dtype=tl.int32)
    for start in range(lo, hi, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < hi
        key = _key(tl.load(x_row + offs, mask=m, other=0.0))
        top = (key >> 24).to(tl.int32)
        is_gt = m & (top > b1)
        is_eq = m & (top == b1)
        v = is_gt.to(tl.int32) + (is_eq.to(tl.int32) << 16)
        cs = tl.cumsum(v, 0)
        cg = cs & 65535
        ce = cs >> 16
        tl.store(o_row + cnt_gt + cg - 1, offs, mask=is_gt)
        pe = cnt_eq + ce - 1
        ki = key.to(tl.int32, bitcast=True)
        tl.store(ck_row + pe, ki, mask=is_eq)
        tl.store(ci_row + pe, offs, mask=is_eq)
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
def _k3_select(len_ptr, gh_ptr, eqf_ptr, out_ptr, stride_o, ckey_ptr, cidx_ptr, N, K,
               BLOCK: tl.constexpr, KBLOCK: tl.constexpr):
    row = tl.program_id(0)
    o_row = out_ptr + row.to(tl.int64) * stride_o
    ck_row = ckey_ptr + row.to(tl.int64) * N
    ci_row = cidx_ptr + row.to(tl.int64) * N
    L, k_eff = _row_len(len_ptr, row, N, K)
    b1, k_rem, E = _pick(tl.load(gh_ptr + row * 256 + tl.arange(0, 256)), k_eff, 256)
    n_gt1 = k_eff - k_rem
    all_eq = (tl.load(eqf_ptr + row * 2) & tl.load(eqf_ptr + row * 2 + 1)) == 0
    if all_eq:
        for start in range(0, k_rem, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            m = offs < k_rem
            tl.store(o_row + n_gt1 + offs, tl.load(ci_row + offs, mask=m, other=0), mask=m)
    else:
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
    assert BLOCK <= 32768 and p["SEL_BLOCK"] <= 32768  # packed 16-bit counts
    ghb = torch.zeros(M * 258, dtype=torch.int32, device=dev)  # one memset: histograms, then 2 OR words per row
    gh = ghb[: M * 256].view(M, 256)
    eqf = ghb[M * 256:]
    cge = torch.empty((M, C, 257), dtype=torch.int32, device=dev)
    ckey = torch.empty((M, max(N, 1)), dtype=torch.int32, device=dev)
    cidx = torch.empty((M, max(N, 1)), dtype=torch.int32, device=dev)
    grid = (M, C)
    _k1_hist[grid](logits, logits.stride(0), lengths, gh, cge, N, k, CH, C, BLOCK=BLOCK, num_warps=p["num_warps"])
    _k2_compact[grid](logits, logits.stride(0), lengths, gh, cge, eqf, out, out.stride(0), ckey, cidx, N, k, CH, C,
                      BLOCK=BLOCK, CB=max(2, triton.next_power_of_2(C)), num_warps=p["num_warps"])
    _k3_select[(M,)](lengths, gh, eqf, out, out.stride(0), ckey, cidx, N, k,
                     BLOCK=p["SEL_BLOCK"], KBLOCK=1024, num_warps=p["SEL_WARPS"])
    return out
