"""dsa_topk best: exact radix select with each row split across many programs.

forward(logits f32[M, N], lengths int32[M], k) -> int32[M, k]

Grid (M, C): program (row, c) owns the chunk [c*CH, (c+1)*CH) of its row. Four launches:
  pass 0/1/2: each program histograms 11/11/10 bits of the order-preserving uint32 key of the
              elements of its chunk whose higher bits match the prefix selected so far, and adds
              its histogram into a per-row global histogram (atomics, non-zero bins only).
              Each program first re-derives the prefix from the earlier passes' global
              histograms (at most 2 x 2048 ints, from L2), so no extra launch is needed.
              Pass 2 also stores, per chunk, the suffix sums of its own last-digit histogram plus
              the count of its elements whose 22-bit prefix is already above the threshold's.
  gather:     each program re-derives the exact threshold key and how many elements equal to it
              to take, gets its output offsets from the per-chunk counts of the chunks before it
              (exclusive prefix over C), and writes its indices; chunk 0 writes the -1 padding.
Output order is deterministic: keys above the threshold in position order, then the first
`need_eq` equal keys in position order, then -1. No cap on a tie bucket.
Memory: one int32 [3, M, 2048] histogram (zeroed per call) and one int32 [M, C, 1025] count table.
"""
import torch
import triton
import triton.language as tl

PARAMS = {"BLOCK": 2048, "TARGET_CTAS": 512, "num_warps": 8}
SPACE = {"BLOCK": [1024, 2048, 4096], "TARGET_CTAS": [132, 264, 512, 1024], "num_warps": [4, 8, 16]}


@triton.jit
def _key(x):
    b = x.to(tl.int32, bitcast=True)
    b = tl.where(x == 0.0, 0, b)
    kk = b ^ ((b >> 31) | -2147483648)
    return kk.to(tl.uint32, bitcast=True)


@triton.jit
def _select(h_ptr, k_rem, prefix, pmask, SHIFT: tl.constexpr, NB: tl.constexpr):
    bins = tl.arange(0, NB)
    hist = tl.load(h_ptr + bins)
    ge = tl.cumsum(hist, 0, reverse=True)
    dsel = tl.max(tl.where(ge >= k_rem, bins, 0), 0)
    gt = tl.sum(tl.where(bins > dsel, hist, 0), 0)
    prefix = prefix | (dsel.to(tl.uint32) << SHIFT)
    pmask = pmask | tl.full([], (NB - 1) << SHIFT, tl.uint32)
    return k_rem - gt, prefix, pmask, dsel


@triton.jit
def _state(gh_ptr, row, M, k_eff, UPTO: tl.constexpr):
    """Re-derive (k_rem, prefix, pmask, last digit) from the global histograms of passes < UPTO."""
    k_rem = k_eff
    prefix = tl.full([], 0, tl.uint32)
    pmask = tl.full([], 0, tl.uint32)
    dsel = 0
    if UPTO >= 1:
        k_rem, prefix, pmask, dsel = _select(gh_ptr + (0 * M + row) * 2048, k_rem, prefix, pmask, 21, 2048)
    if UPTO >= 2:
        k_rem, prefix, pmask, dsel = _select(gh_ptr + (1 * M + row) * 2048, k_rem, prefix, pmask, 10, 2048)
    if UPTO >= 3:
        k_rem, prefix, pmask, dsel = _select(gh_ptr + (2 * M + row) * 2048, k_rem, prefix, pmask, 0, 1024)
    return k_rem, prefix, pmask, dsel


@triton.jit
def _hist_kernel(x_ptr, stride_x, len_ptr, gh_ptr, cge_ptr, M, N, K, CH, C,
                 PASS: tl.constexpr, SHIFT: tl.constexpr, NB: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.program_id(1)
    x_row = x_ptr + row.to(tl.int64) * stride_x
    L = tl.minimum(tl.maximum(tl.load(len_ptr + row), 0), N)
    k_eff = tl.minimum(K, L)
    k_rem, prefix, pmask, dsel = _state(gh_ptr, row, M, k_eff, PASS)
    lo = c * CH
    hi = tl.minimum(lo + CH, L)
    hist = tl.zeros([NB], dtype=tl.int32)
    above = tl.zeros([BLOCK], dtype=tl.int32)
    for start in range(lo, hi, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < hi
        key = _key(tl.load(x_row + offs, mask=m, other=0.0))
        mk = key & pmask
        d = ((key >> SHIFT) & (NB - 1)).to(tl.int32)
        hist += tl.histogram(d, NB, mask=m & (mk == prefix))
        if PASS == 2:
            above += (m & (mk > prefix)).to(tl.int32)
    bins = tl.arange(0, NB)
    tl.atomic_add(gh_ptr + (PASS * M + row) * 2048 + bins, hist, mask=hist > 0, sem="relaxed")
    if PASS == 2:
        base = cge_ptr + (row * C + c).to(tl.int64) * 1025
        part = tl.sum(above, 0)
        tl.store(base + bins, tl.cumsum(hist, 0, reverse=True) + part)
        tl.store(base + 1024, part)


@triton.jit
def _gather_kernel(x_ptr, stride_x, len_ptr, gh_ptr, cge_ptr, out_ptr, stride_o, M, N, K, CH, C,
                   BLOCK: tl.constexpr, CB: tl.constexpr, KBLOCK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.program_id(1)
    x_row = x_ptr + row.to(tl.int64) * stride_x
    o_row = out_ptr + row.to(tl.int64) * stride_o
    L = tl.minimum(tl.maximum(tl.load(len_ptr + row), 0), N)
    k_eff = tl.minimum(K, L)
    need_eq, thr, pmask, d3 = _state(gh_ptr, row, M, k_eff, 3)
    n_gt = k_eff - need_eq
    # offsets from the chunks before this one
    cs = tl.arange(0, CB)
    cm = cs < c
    cbase = cge_ptr + (row * C + cs).to(tl.int64) * 1025
    g_before = tl.load(cbase + d3 + 1, mask=cm, other=0)
    ge_before = tl.load(cbase + d3, mask=cm, other=0)
    cnt_gt = tl.sum(g_before, 0)
    cnt_eq = tl.sum(ge_before - g_before, 0)
    lo = c * CH
    hi = tl.minimum(lo + CH, L)
    for start in range(lo, hi, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < hi
        key = _key(tl.load(x_row + offs, mask=m, other=0.0))
        is_gt = m & (key > thr)
        is_eq = m & (key == thr)
        cg = tl.cumsum(is_gt.to(tl.int32), 0)
        ce = tl.cumsum(is_eq.to(tl.int32), 0)
        tl.store(o_row + cnt_gt + cg - 1, offs, mask=is_gt)
        take = is_eq & (cnt_eq + ce <= need_eq)
        tl.store(o_row + n_gt + cnt_eq + ce - 1, offs, mask=take)
        cnt_gt += tl.sum(is_gt.to(tl.int32), 0)
        cnt_eq += tl.sum(is_eq.to(tl.int32), 0)
    if c == 0:
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
    gh = torch.zeros((3, M, 2048), dtype=torch.int32, device=dev)
    cge = torch.empty((M, C, 1025), dtype=torch.int32, device=dev)
    grid = (M, C)
    for ps in range(3):
        _hist_kernel[grid](logits, logits.stride(0), lengths, gh, cge, M, N, k, CH, C,
                           PASS=ps, SHIFT=(21, 10, 0)[ps], NB=(2048, 2048, 1024)[ps], BLOCK=BLOCK, num_warps=p["num_warps"])
    _gather_kernel[grid](logits, logits.stride(0), lengths, gh, cge, out, out.stride(0), M, N, k, CH, C,
                         BLOCK=BLOCK, CB=max(2, triton.next_power_of_2(C)), KBLOCK=1024,
                         num_warps=p["num_warps"])
    return out
