"""dsa_indexer_topk_fp8 seed: the bf16 indexer seed's design on the FP8 contract, chunked logits with an
incremental (running) exact top-k.

forward(q_index_fp8 e4m3[B, 64, 128], k_index_cache_fp8 int8[P, 64, 1, 132], weights f32[B, 64],
        seq_lens int32[B], block_table int32[B, max_pages]) -> int32[B, 2048] global token ids, -1 padded

Logical positions are taken in chunks of CHUNK (32K, a multiple of the 64-token page). For each chunk
  1. a Triton kernel walks each row's pages of the chunk through its block table (FP8 tl.dot of a page's 64
     keys against the row's 64 heads, f32 accumulation, relu, weighted head sum, times the page's K scales)
     and writes the chunk's logits into the tail of a work buffer [B, 2048 + CHUNK] whose head holds the
     running top-k of the chunks before;
  2. a merge kernel (exact radix select, one program per row) keeps the top 2048 of running U chunk.
A last kernel maps the logical positions to page id x 64 + offset. Exact: every element of the final top-k
is in the top-k of (running U chunk) at its chunk; ties go to the earlier position.
"""
import torch
import triton
import triton.language as tl

PARAMS = {"BT": 64, "CHUNK": 32768, "PAGES": 16, "num_warps": 4, "num_stages": 3, "MERGE_BLOCK": 4096, "MERGE_WARPS": 8,
          "MAP_BLOCK": 1024}
SPACE = {"BT": [64, 128], "CHUNK": [16384, 32768, 65536], "PAGES": [8, 16, 32], "num_warps": [4, 8], "num_stages": [2, 3, 4],
         "MERGE_BLOCK": [2048, 4096], "MERGE_WARPS": [4, 8, 16]}

H_IDX = 64
D_IDX = 128
PAGE = 64
TOPK = 2048
CPU_BT = 1024  # tokens per step in Triton's CPU interpreter, where each op costs milliseconds


@triton.jit
def _e4m3(b):
    """e4m3fn bytes (uint8) -> their exact f32 values, from the bits: Triton's CPU interpreter converts FP8
    one element at a time (minutes per call), this is numpy-wide. NaN (0x7f/0xff) is not decoded."""
    bi = b.to(tl.int32)
    e = (bi >> 3) & 15
    mnt = bi & 7
    normal = (((bi & 128) << 24) | ((e + 120) << 23) | (mnt << 20)).to(tl.float32, bitcast=True)
    sub = mnt.to(tl.float32) * 0.001953125
    return tl.where(e == 0, tl.where(bi >= 128, -sub, sub), normal)


@triton.jit(do_not_specialize=["B", "s0", "cw"])
def _fp8_logits(q_ptr, kv_ptr, kf_ptr, w_ptr, len_ptr, bt_ptr, out_ptr, stride_bt, stride_om, B, s0, cw,
                H: tl.constexpr, D: tl.constexpr, PG: tl.constexpr, PAGES: tl.constexpr, BT: tl.constexpr,
                UPCAST: tl.constexpr):
    """out[m, t] = scale_t * sum_h w[m, h] relu(q[m, h] . k_t) at t - s0 for the row's tokens t of
    pages [s0 / 64 + pid * PAGES, ...) inside the window [s0, s0 + cw); kv_ptr is the cache as FP8 bytes,
    kf_ptr the same cache as f32 words."""
    m = tl.program_id(0)
    pid = tl.program_id(1)
    L = tl.load(len_ptr + m)
    p_lo = s0 // PG + pid * PAGES
    p_hi = tl.minimum(tl.minimum(p_lo + PAGES, (s0 + cw) // PG), (L + PG - 1) // PG)
    hh = tl.arange(0, H)
    dd = tl.arange(0, D)
    q = tl.load(q_ptr + (m * H + hh).to(tl.int64)[:, None] * D + dd[None, :])
    w = tl.load(w_ptr + m * H + hh)
    if UPCAST:  # CPU interpreter: bytes in, no FP8 dot there; FP8 products are exact in f32
        q = _e4m3(q)
    qt = tl.trans(q)                                                   # [D, H]
    row_out = out_ptr + m.to(tl.int64) * stride_om
    tok = tl.arange(0, BT)
    for t0 in range(p_lo * PG, p_hi * PG, BT):                         # BT tokens: BT / 64 pages at a time
        pos = t0 + tok
        inb = pos < p_hi * PG
        page = tl.load(bt_ptr + m.to(tl.int64) * stride_bt + pos // PG, mask=inb, other=0).to(tl.int64)
        base = page * (PG * (D + 4)) + (pos % PG) * D
        kb = tl.load(kv_ptr + base[:, None] + dd[None, :], mask=inb[:, None])   # [BT, D] FP8; masked tokens unstored
        sc = tl.load(kf_ptr + page * (PG * (D + 4) // 4) + (PG * D // 4) + pos % PG, mask=inb, other=0.0)
        if UPCAST:
            kb = _e4m3(kb)
        s = tl.dot(kb, qt)                                             # [BT, H] f32
        lg = tl.sum(tl.maximum(s, 0.0) * w[None, :], 1) * sc
        tl.store(row_out + pos - s0, lg, mask=inb & (pos < L))


@triton.jit
def _to_global(out_ptr, bt_ptr, stride_bt, K, PG: tl.constexpr, BLOCK: tl.constexpr):
    """Logical positions -> page id x 64 + offset, in place; -1 stays -1."""
    m = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < K
    j = tl.load(out_ptr + m.to(tl.int64) * K + offs, mask=inside, other=-1)
    live = inside & (j >= 0)
    page = tl.load(bt_ptr + m.to(tl.int64) * stride_bt + j // PG, mask=live, other=0)
    tl.store(out_ptr + m.to(tl.int64) * K + offs, tl.where(live, page * PG + j % PG, -1), mask=inside)


@triton.jit
def _to_global(out_ptr, bt_ptr, stride_bt, K, PG: tl.constexpr, BLOCK: tl.constexpr):
    """Logical positions -> page id x 64 + offset, in place; -1 stays -1."""
    m = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < K
    j = tl.load(out_ptr + m.to(tl.int64) * K + offs, mask=inside, other=-1)
    live = inside & (j >= 0)
    page = tl.load(bt_ptr + m.to(tl.int64) * stride_bt + j // PG, mask=live, other=0)
    tl.store(out_ptr + m.to(tl.int64) * K + offs, tl.where(live, page * PG + j % PG, -1), mask=inside)



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


def forward(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table):
    assert q_index_fp8.dtype == torch.float8_e4m3fn
    B, H, D = q_index_fp8.shape
    assert H == H_IDX and D == D_IDX and tuple(k_index_cache_fp8.shape[1:]) == (PAGE, 1, D + 4)
    dev = q_index_fp8.device
    q = q_index_fp8.contiguous()
    if dev.type == "cpu":
        q = q.view(torch.uint8)
    cache = k_index_cache_fp8.contiguous()
    kv = cache.view(torch.float8_e4m3fn if dev.type != "cpu" else torch.uint8)
    kf = cache.view(torch.float32)
    weights = weights.to(torch.float32).contiguous()
    lengths = seq_lens.to(torch.int32).contiguous()
    bt = block_table.to(torch.int32).contiguous()
    p = PARAMS
    k = TOPK
    N = bt.shape[1] * PAGE
    CH = min(p["CHUNK"], max(PAGE, triton.next_power_of_2(max(N, 1))))
    W = k + CH
    bufs = [torch.empty((B, W), dtype=torch.float32, device=dev) for _ in range(2)]
    idxs = [torch.empty((B, k), dtype=torch.int32, device=dev) for _ in range(2)]
    if B == 0:
        return idxs[0]
    if N == 0:
        return idxs[0].fill_(-1)
    cur = 0
    for c in range(triton.cdiv(N, CH)):
        s0 = c * CH
        cw = min(CH, N - s0)
        grid = (B, triton.cdiv(cw // PAGE, p["PAGES"]))
        _fp8_logits[grid](q, kv, kf, weights, lengths, bt, bufs[cur][:, k:], bt.stride(0), W, B, s0, cw, H=H, D=D,
                          PG=PAGE, PAGES=p["PAGES"], BT=p["BT"] if dev.type != "cpu" else CPU_BT,
                          UPCAST=dev.type == "cpu", num_warps=p["num_warps"],
                          num_stages=p["num_stages"])
        nxt = 1 - cur
        _merge_kernel[(B,)](bufs[cur], W, idxs[cur], bufs[nxt], idxs[nxt], lengths, k, cw, s0,
                            1 if c > 0 else 0, BLOCK=p["MERGE_BLOCK"], KBLOCK=1024, num_warps=p["MERGE_WARPS"])
        cur = nxt
    out = idxs[cur]
    _to_global[(B, triton.cdiv(k, p["MAP_BLOCK"]))](out, bt, bt.stride(0), k, PG=PAGE, BLOCK=p["MAP_BLOCK"])
    return out
