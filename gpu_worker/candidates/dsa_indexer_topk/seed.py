"""dsa_indexer_topk seed: chunked logits with an incremental (running) exact top-k.

forward(q bf16[M, 64, 128], k_index bf16[N, 128], weights f32[M, 64], lengths int32[M], k)
    -> int32[M, k]
I[m, s] = sum_h weights[m, h] * relu(q[m, h, :] . k_index[s, :]) for s < lengths[m].

The talk's thesis, done literally: keys are taken in chunks of CHUNK (default 32K). For each chunk
  1. a Triton logits kernel (tl.dot bf16 x bf16 -> f32 accumulate, ReLU, weighted head sum in
     f32) writes the chunk's logits [M, CHUNK] into the tail of a work buffer [M, k + CHUNK];
     the head of that buffer holds the running top-k values of the chunks before;
  2. a Triton merge kernel (exact radix select, one program per row) selects the top k of
     (running top-k U this chunk's valid logits) and writes values + global indices into the
     head of the other work buffer (double-buffered), which becomes the running top-k.
What reaches memory: never the full [M, N] logits. Per chunk, M x CHUNK f32 logits are written
once and read 5 times by the merge (4 x 8-bit histogram passes + gather) (they live in L2 at the default size); the running state is
M x k values + indices. Footprint: 2 x M x (k + CHUNK) f32 + 2 x M x k int32 (about 18 MB at
M=64, CHUNK=32K) instead of M x N f32 (32 MB at 128K, 64 GB for a 128K x 128K prefill).
Exactness: every element of the global top-k is in the top-k of (running U chunk) at its chunk.
Ties: the merge takes, among the elements equal to the k-th value, the first ones by buffer
position (running entries before the new chunk's), so the result is deterministic.
"""
import torch
import triton
import triton.language as tl

PARAMS = {"CHUNK": 32768, "ROWS": 2, "BLOCK_N": 128, "N_PER_PROG": 2048, "TRANS": 1,
          "num_warps": 8, "num_stages": 3, "MERGE_BLOCK": 4096, "MERGE_WARPS": 8}
SPACE = {"CHUNK": [16384, 32768, 65536], "ROWS": [1, 2], "BLOCK_N": [64, 128], "N_PER_PROG": [1024, 2048, 4096],
         "TRANS": [0, 1], "num_warps": [4, 8], "num_stages": [2, 3, 4], "MERGE_BLOCK": [2048, 4096],
         "MERGE_WARPS": [4, 8, 16]}

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
def _load_valid(buf_row, ridx_row, offs, K, cw, s0, Lm, has_run):
    in_run = offs < K
    ridx = tl.load(ridx_row + offs, mask=offs < K * has_run, other=-1)
    valid = (in_run & (ridx >= 0)) | ((offs >= K) & (offs < K + cw) & (s0 + offs - K < Lm))
    x = tl.load(buf_row + offs, mask=valid, other=0.0)
    gidx = tl.where(in_run, ridx, s0 + offs - K)
    return _key(x), x, valid, gidx


@triton.jit
def _merge_pass(buf_row, ridx_row, K, cw, s0, Lm, has_run, k_rem, prefix, pmask,
                SHIFT: tl.constexpr, NB: tl.constexpr, BLOCK: tl.constexpr):
    hist = tl.zeros([NB], dtype=tl.int32)
    for start in range(0, K + cw, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        key, x, valid, gidx = _load_valid(buf_row, ridx_row, offs, K, cw, s0, Lm, has_run)
        d = ((key >> SHIFT) & (NB - 1)).to(tl.int32)
        hist += tl.histogram(d, NB, mask=valid & ((key & pmask) == prefix))
    return hist


@triton.jit
def _pick(hist, k_rem, prefix, pmask, SHIFT: tl.constexpr, NB: tl.constexpr):
    bins = tl.arange(0, NB)
    ge = tl.cumsum(hist, 0, reverse=True)
    dsel = tl.max(tl.where(ge >= k_rem, bins, 0), 0)
    gt = tl.sum(tl.where(bins > dsel, hist, 0), 0)
    prefix = prefix | (dsel.to(tl.uint32) << SHIFT)
    pmask = pmask | tl.full([], (NB - 1) << SHIFT, tl.uint32)
    return k_rem - gt, prefix, pmask


@triton.jit
def _merge_kernel(buf_ptr, stride_b, ridx_ptr, nbuf_ptr, nidx_ptr, len_ptr, K, cw, s0, has_run,
                  BLOCK: tl.constexpr, KBLOCK: tl.constexpr):
    row = tl.program_id(0)
    buf_row = buf_ptr + row.to(tl.int64) * stride_b
    ridx_row = ridx_ptr + row.to(tl.int64) * K
    nbuf_row = nbuf_ptr + row.to(tl.int64) * stride_b
    nidx_row = nidx_ptr + row.to(tl.int64) * K
    Lm = tl.load(len_ptr + row)
    prefix = tl.full([], 0, tl.uint32)
    pmask = tl.full([], 0, tl.uint32)
    hist = _merge_pass(buf_row, ridx_row, K, cw, s0, Lm, has_run, 0, prefix, pmask, 24, 256, BLOCK)
    k_eff = tl.minimum(K, tl.sum(hist, 0))
    k_rem, prefix, pmask = _pick(hist, k_eff, prefix, pmask, 24, 256)
    hist = _merge_pass(buf_row, ridx_row, K, cw, s0, Lm, has_run, k_rem, prefix, pmask, 16, 256, BLOCK)
    k_rem, prefix, pmask = _pick(hist, k_rem, prefix, pmask, 16, 256)
    hist = _merge_pass(buf_row, ridx_row, K, cw, s0, Lm, has_run, k_rem, prefix, pmask, 8, 256, BLOCK)
    k_rem, prefix, pmask = _pick(hist, k_rem, prefix, pmask, 8, 256)
    hist = _merge_pass(buf_row, ridx_row, K, cw, s0, Lm, has_run, k_rem, prefix, pmask, 0, 256, BLOCK)
    k_rem, prefix, pmask = _pick(hist, k_rem, prefix, pmask, 0, 256)
    thr = prefix
    need_eq = k_rem
    n_gt = k_eff - k_rem
    cnt_gt = 0
    cnt_eq = 0
    for start in range(0, K + cw, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        key, x, valid, gidx = _load_valid(buf_row, ridx_row, offs, K, cw, s0, Lm, has_run)
        is_gt = valid & (key > thr)
        is_eq = valid & (key == thr)
        cg = tl.cumsum(is_gt.to(tl.int32), 0)
        ce = tl.cumsum(is_eq.to(tl.int32), 0)
        pg = cnt_gt + cg - 1
        tl.store(nidx_row + pg, gidx, mask=is_gt)
        tl.store(nbuf_row + pg, x, mask=is_gt)
        take = is_eq & (cnt_eq + ce <= need_eq)
        pe = n_gt + cnt_eq + ce - 1
        tl.store(nidx_row + pe, gidx, mask=take)
        tl.store(nbuf_row + pe, x, mask=take)
        cnt_gt += tl.sum(is_gt.to(tl.int32), 0)
        cnt_eq += tl.sum(is_eq.to(tl.int32), 0)
    for start in range(0, K, KBLOCK):
        offs = start + tl.arange(0, KBLOCK)
        tl.store(nidx_row + offs, tl.full([KBLOCK], -1, tl.int32), mask=(offs >= k_eff) & (offs < K))


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
    CH = max(16, min(p["CHUNK"], triton.next_power_of_2(max(N, 1))))
    W = k + CH
    bufs = [torch.empty((M, W), dtype=torch.float32, device=dev) for _ in range(2)]
    idxs = [torch.empty((M, k), dtype=torch.int32, device=dev) for _ in range(2)]
    if M == 0 or k == 0:
        return idxs[0]
    ROWS = p["ROWS"]
    cur = 0
    nchunks = triton.cdiv(N, CH)
    if N == 0:
        idxs[0].fill_(-1)
        return idxs[0]
    for c in range(nchunks):
        s0 = c * CH
        cw = min(CH, N - s0)
        grid = (triton.cdiv(M, ROWS), triton.cdiv(cw, p["N_PER_PROG"]))
        _logits_kernel[grid](q, k_index, weights, lengths, bufs[cur][:, k:], W, M, s0, cw,
                             H=H, D=D, ROWS=ROWS, BLOCK_N=p["BLOCK_N"], N_PER_PROG=p["N_PER_PROG"],
                             TRANS=p["TRANS"], UPCAST=dev.type == "cpu", num_warps=p["num_warps"], num_stages=p["num_stages"])
        nxt = 1 - cur
        _merge_kernel[(M,)](bufs[cur], W, idxs[cur], bufs[nxt], idxs[nxt], lengths, k, cw, s0,
                            1 if c > 0 else 0, BLOCK=p["MERGE_BLOCK"], KBLOCK=1024,
                            num_warps=p["MERGE_WARPS"])
        cur = nxt
    return idxs[cur]
