"""dsa_topk best: sampled-threshold radix select with key-linear digits, and a multi-program radix refine for the
rows whose sample misses. Sample a threshold, filter once with a slot per warp, place the candidates above the
k-th value's digit from every program, rank that digit's few members; rows where that cannot work are selected
again by all of their programs. Nine launches chained by programmatic dependent launch.

forward(logits f32[M, N], lengths int32[M], k) -> int32[M, k]

Values map to order-preserving uint32 keys (as in seed.py). The common path:
  KA  grid (M,): S = NS x G samples (NS groups of G contiguous values, each group 16-byte aligned); thr is a key
      with at least r samples at or above it, r = 1.5 k S / L + 12 (about 5 standard deviations more than
      expected above the true k-th value): the lower edge of the bin that two 8-bit histogram levels pick.
      A row of at most SMALL values (and more than k) is read whole: thr is just below the lower edge of the
      bin that the same two levels pick for the k-th value of the row itself (so few more than k candidates).
      Also the digit scale: the distance above thr of the sampled key ranked where the row's k-th key is
      expected, >> sh, lands in 2^(SPAN_BITS-KTH-1) to 2^(SPAN_BITS-KTH) digits (from the bit lengths of the
      sampled distances; with KDIG > 0, on digit KDIG to 1.125 KDIG: a shift and a factor f / 2^16 from one
      histogram of those distances in eighths of an octave), where thr >= 0 and the row is not marked; else
      (largest sample - thr) >> sh spans 2^(SPAN_BITS-1) to 2^SPAN_BITS digits. With VLIN = 1,
      a row whose thr < 0 lies below a positive largest key gets value-linear digits instead (the model's own
      logits at short contexts; docs/kernels.md, "Value-linear digits"); with VLIN = 2 also a row marked at
      +0.0 with positives above it, scaled by its sampled k-th value's exponent (docs/kernels.md, "ReLU zeros at
      the threshold").
      A tie: when the smallest sampled key at or above thr, q, has more samples than TIE copies in the row
      would give (ties, ReLU zeros; counted exactly against TIE_WHOLE on a row read whole), thr = q and the
      row is marked.
      KA zeroes the per-program counters and the row's digit histogram.
  KB  grid (M, C): each row split evenly over its C programs; each scans its part once (whole blocks with
      unmasked 16-byte loads, PF blocks in flight while one is filtered) and writes keys > thr (key, index)
      to its own region of RC = max(2 SMALL / C, RMIN, RROW / C) slots. On a GPU (WARP = 1) the slots come per warp: each value's test is balloted
      in inline PTX, lane 0 takes the warp's slots with one atomic and each thread stores its own candidates
      (_WARP_SLOTS_PTX; about 10 instructions per value where Triton's per-value atomics took ~47). Elsewhere
      a slot per candidate from the program's atomic counter, or a block scan when M <= SCAN_MAX_ROWS. Then it
      re-reads its candidates for a 256-bin histogram of the digit (_dig, clamped to 255): added to the
      row's histogram by integer atomics, and stored as its own suffix counts #(digit >= b). On a marked row
      it also counts its copies of thr.
  KD  grid (M, C): from the row histogram every program of a row takes the same decision; in the two common
      cases it places its own region (its first RT = 512 slots loaded right after its wait, the rest of a
      larger one in chunks of RT) at offsets read from two columns of the
      suffix counts of the programs before it (no atomics, fixed order): mode 1 all candidates (n_gt ==
      k_eff); mode 2 (n_gt > k_eff, the k-th candidate's digit d < 255 with at most SMALLR members) the
      candidates of a larger digit to the output and d's members to the rank scratch; mode 3 (a marked row,
      n_gt < k_eff <= n_gt + the copies of thr) all candidates, then k_eff - n_gt copies of thr, each program
      taking the first of its own part by a share of the count (_tie_quota); with TIE2, mode 4 (a marked row
      whose candidates are q2, the next key above thr, and keys above q2, with the k-th at q2) the same with q2
      in thr's place. Other rows: mode 0.
  KC  grid (M,): mode 2 ranks d's members pairwise on (key desc, index asc) in 64 x R tiles, R = 64 or SMALLR
      by their count (or KC_MID = 128 between them); every row gets its -1 padding.
The refine, for mode-0 rows (a region overflowed, too few candidates, a tie bucket or a crowded digit at the
k-th value); its programs return at once on every other row:
  R0-R3  grid (M, C): four 8-bit digits of the key from the top, each histogrammed over the keys that match
      the digits chosen so far by all C programs of the row (integer atomics), each program choosing the same
      digit from the same table. A block whose digits are all one is counted by one reduction.
      Each level also records its programs' largest key and its count: a tie bucket at the k-th key (ties,
      ReLU zeros) fixes T early and the levels after it return at once.
  RP  grid (M, C): keys above the k-th key T go to the output (a slot block per program block from the row's
      counter); keys equal to T in index order, program c after the equal keys of the programs before it.
Every pass of the refine costs the row's length divided by C: no row is selected by one program. With RLIST = 1
the refine's grid is (P, C), P = RGRID / C, instead of (M, C): KD lists the rows it sends to the refine and
program (p, c) takes part c of listed rows p, p + P, ...; on a call where no row refines, P x C programs read one
word each instead of M x C reading two.
With PDL = 1 (a GPU only), every launch after KA uses programmatic dependent launch: its programs start while the
one before finishes and wait (griddepcontrol.wait) before they read its output; KB's first logits loads go out
before that wait. Exact as a set, deterministic as a set, no cap on tie buckets. How it came to be, with the
measurements of each step: docs/kernels.md; the retired variants: docs/history.md.
"""
import torch
import triton
import triton.language as tl

PARAMS = {"BLOCK": 1024, "TARGET_CTAS": 1024, "MAX_C": 64, "num_warps": 4, "SMALL": 4096, "SEL_WARPS": 16,
          "NS": 64, "G": 16, "ALPHA_X2": 3, "BETA": 12, "ATOMIC": 1, "MIN_C": 16,
          "SMALLR": 512, "SPAN_BITS": 9, "SMALLTA": 1024, "HREG": 0, "KD_WARPS": 4, "PF": 2, "SCAN_MAX_ROWS": 8, "KA_WARPS": 8, "PDL": 1,
          "WARP": 1, "KD_EARLY": 1, "RBLOCK": 2048, "TIE": 512, "KTH": 2, "RLIST": 1, "RMIN": 512, "RROW": 16384,
          "RGRID": 256, "VLIN": 1, "TIE_WHOLE": 128, "KDIG": 80, "KDIG_ROWS": 32, "KC_MID": 128, "TIE2": 1, "TIE2_MAX_N": 32768,
          "TIE2_ROWS": 4, "SHORT": 4096, "KC_SORT": 0}
SPACE = {"BLOCK": [512, 1024, 2048, 4096, 8192], "TARGET_CTAS": [264, 512, 1024, 2048], "MAX_C": [16, 32, 64],
         "num_warps": [2, 4, 8], "SMALL": [4096, 8192], "SEL_WARPS": [4, 8, 16], "NS": [64, 128, 256],
         "G": [8, 16, 32], "ALPHA_X2": [2, 3, 4], "BETA": [4, 12, 24], "ATOMIC": [0, 1],
         "MIN_C": [1, 8, 16], "RMIN": [0, 256, 512], "RROW": [0, 8192, 16384, 32768],
         "SMALLR": [256, 512, 1024], "SPAN_BITS": [8, 9, 10], "SMALLTA": [512, 1024, 2048], "HREG": [0, 1], "KD_WARPS": [2, 4, 8], "PF": [0, 1, 2],
         "SCAN_MAX_ROWS": [0, 4, 8, 16], "KA_WARPS": [4, 8], "PDL": [0, 1],
         "WARP": [0, 1], "KD_EARLY": [0, 1], "RBLOCK": [1024, 2048, 4096], "TIE": [0, 256, 512, 2048],
         "KTH": [0, 2, 3], "RLIST": [0, 1], "RGRID": [128, 256, 512],
         "VLIN": [0, 1, 2], "TIE_WHOLE": [0, 64, 128, 256, 512], "KDIG": [0, 64, 80, 96], "KDIG_ROWS": [0, 32, 64], "KC_MID": [0, 128, 256], "TIE2": [0, 1], "TIE2_MAX_N": [0, 32768, 65536],
         "TIE2_ROWS": [0, 4, 8], "SHORT": [0, 4096, 8192], "KC_SORT": [0, 1]}


@triton.jit
def _key(x):
    b = x.to(tl.int32, bitcast=True)
    b = tl.where(x == 0.0, 0, b)
    kk = b ^ ((b >> 31) | -2147483648)
    return kk.to(tl.uint32, bitcast=True)


@triton.jit
def _val(key):
    """The f32 value of a key (_key's inverse; -0.0 comes back as 0.0)."""
    k = key.to(tl.int32, bitcast=True)
    return tl.where(k < 0, k ^ -2147483648, ~k).to(tl.float32, bitcast=True)


@triton.jit
def _dig(key, thr, sh, f, sc, VLIN: tl.constexpr):
    """The digit of keys above thr, clamped to 255: key-linear, ((key - thr) >> sh) x f / 2^16 (f = 2^16 but
    where KA scaled the sampled k-th's distance to digit KDIG; the product fits 32 bits: the first factor is
    clamped to 2^16 - 1, which the 255 clamp hides, and f <= 2^16); or, on a row where KA chose value-linear
    digits (VLIN and sc > 0), floor((value - value(thr)) x sc). All are monotone in the key: a NaN (its key
    above +inf's) takes the top digit in each, as torch.topk ranks it first."""
    d = tl.minimum((tl.minimum((key - thr) >> sh, 65535) * f) >> 16, 255).to(tl.int32)
    if VLIN:
        if sc > 0:
            v = (_val(key) - _val(thr)) * sc
            d = tl.minimum(tl.maximum(tl.where(v == v, v, 255.0), 0.0), 255.0).to(tl.int32)
    return d


@triton.jit
def _row_len(len_ptr, row, N, K):
    L = tl.minimum(tl.maximum(tl.load(len_ptr + row), 0), N)
    return L, tl.minimum(K, L)


@triton.jit
def _pick(hist, k_rem, NB: tl.constexpr):
    # the largest digit d with #(digit >= d) >= k_rem; k_rem left for the elements of digit d
    bins = tl.arange(0, NB)
    ge = tl.cumsum(hist, 0, reverse=True)
    dsel = tl.max(tl.where(ge >= k_rem, bins, 0), 0)
    gt = tl.sum(tl.where(bins > dsel, hist, 0), 0)
    return dsel, k_rem - gt


@triton.jit
def _pick_n(hist, k_rem, NB: tl.constexpr):
    bins = tl.arange(0, NB)
    dsel, k_rem = _pick(hist, k_rem, NB)
    return dsel, k_rem, tl.sum(tl.where(bins == dsel, hist, 0), 0)


@triton.jit
def _approx_top(d, active, k_rem, scr_ptr, SMALLTA: tl.constexpr, COMPACT: tl.constexpr):
    """A lower bound t of the k_rem-th largest of d[active] (uint32) with #(d >= t) >= k_rem: two 8-bit
    histogram levels of _radix_top (the second over the members of the first level's bin, compacted into
    a SMALLTA tile when COMPACT: d is larger than that tile); t is the lower edge of the chosen
    second-level bin. KA needs no more: the threshold only has to leave at least r samples above it."""
    hi = tl.max(tl.where(active, d, 0), 0)
    nbits = ((hi.to(tl.float32).to(tl.int32, bitcast=True) >> 23) - 126)
    sh = tl.minimum(tl.maximum(32 - nbits, 0), 31).to(tl.uint32)
    d = d << sh
    top = (d >> 24).to(tl.int32)
    dsel, k_rem, cnt = _pick_n(tl.histogram(top, 256, mask=active), k_rem, 256)
    inb = active & (top == dsel)
    if COMPACT and cnt <= SMALLTA:
        tl.store(scr_ptr + tl.cumsum(inb.to(tl.int32), 0) - 1, d.to(tl.int32, bitcast=True), mask=inb)
        tl.debug_barrier()
        o = tl.arange(0, SMALLTA)
        m2 = o < cnt
        d2 = tl.load(scr_ptr + o, mask=m2, other=0).to(tl.uint32, bitcast=True)
        h2 = tl.histogram(((d2 >> 16) & 255).to(tl.int32), 256, mask=m2)
    else:
        # the tile itself is no larger: histogram it masked (no round trip through the scratch)
        h2 = tl.histogram(((d >> 16) & 255).to(tl.int32), 256, mask=inb)
    dsel2, k_rem = _pick(h2, k_rem, 256)
    return ((dsel.to(tl.uint32) << 24) | (dsel2.to(tl.uint32) << 16)) >> sh


# Triton compiles a kernel again for each class of an integer argument (== 1, a multiple of 16, other). N and
# C only bound loops and masks: their classes would cost compiles (seconds each, in the verify stage of every
# evaluation) and buy nothing. The row stride stays specialised: its class makes KB's loads 16 bytes wide.
NO_SPEC = ["N", "C"]


@triton.jit(do_not_specialize=NO_SPEC)
def _ka_sample(x_ptr, stride_x, len_ptr, thr_ptr, t2_ptr, cnt_ptr, rh_ptr, scr_ptr, rl_ptr, N, K, SMALL, C, NS: tl.constexpr,
               G: tl.constexpr, ALPHA_X2: tl.constexpr, BETA: tl.constexpr, CB: tl.constexpr,
               SMALLTA: tl.constexpr, SPAN_BITS: tl.constexpr, PDL: tl.constexpr, FULL: tl.constexpr,
               TIE: tl.constexpr, KTH: tl.constexpr, VLIN: tl.constexpr, TIE_WHOLE: tl.constexpr,
               KDIG: tl.constexpr, TIE2: tl.constexpr):
    row = tl.program_id(0)
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()     # KB may start now: it waits for this grid before reading its output
    L, k_eff = _row_len(len_ptr, row, N, K)
    cs_ = tl.arange(0, CB)
    tl.store(cnt_ptr + row * C + cs_, tl.zeros([CB], dtype=tl.int32), mask=cs_ < C)
    tl.store(rh_ptr + row * 256 + tl.arange(0, 256), tl.zeros([256], dtype=tl.int32))
    if row == 0:
        tl.store(rl_ptr, 0)        # the refine's row list, empty (KD appends to it)
    S: tl.constexpr = NS * G
    s_ = tl.arange(0, S)
    thr = tl.zeros([], dtype=tl.uint32)
    span = tl.zeros([], dtype=tl.uint32)
    tie = tl.zeros([], dtype=tl.int32)
    nbk = tl.zeros([], dtype=tl.int32)
    f = tl.full([], 65536, tl.int32)        # _dig's factor: 2^16, the plain shift
    q2 = tl.full([], 0xFFFFFFFF, tl.uint32)  # TIE2: the smallest key above a marked thr (sampled, or the row's)
    ze = tl.zeros([], dtype=tl.int32)       # VLIN 2: the exponent of a marked zero row's sampled k-th value
    if L > SMALL:
        gap = tl.multiple_of(L // NS // G * G, G)       # groups start at multiples of G: wide loads
        key = _key(tl.load(x_ptr + row.to(tl.int64) * stride_x + (s_ // G) * gap + s_ % G))
        r = tl.minimum((k_eff * S * ALPHA_X2) // (2 * L) + BETA, S)
        # at least r samples >= thr (relative to the smallest sample, so that the first level spreads)
        lo_key = tl.min(key, 0)
        thr = _approx_top(key - lo_key, key >= lo_key, r, scr_ptr + row * SMALLTA, SMALLTA, SMALLTA < S) + lo_key
        if TIE > 0:
            # a tie bucket at the threshold: q, the smallest sampled key at or above thr, with more samples than
            # TIE copies in the row would give (then q's digit would be crowded, or a region overflow): the
            # threshold becomes q itself, KB counts q's copies and KD takes what the row needs of them (mode 3)
            q = tl.min(tl.where(key >= thr, key, tl.full([], 0xFFFFFFFF, tl.uint32)), 0)
            tie = (tl.sum((key == q).to(tl.int32), 0) > (TIE * S) // L).to(tl.int32)
            thr = tl.where(tie != 0, q, thr)
            if TIE2:
                q2 = tl.min(tl.where(key > thr, key, tl.full([], 0xFFFFFFFF, tl.uint32)), 0)
        span = tl.max(key, 0) - thr
        if VLIN == 2:
            # ReLU zeros: the sample's threshold among the zeros marks a tie at +0.0, but more than k positives lie
            # above it. Key-linear digits from zero put an octave in a few digits: the k-th digit held more than
            # SMALLR and the row took the refine (the indexers' relu family at 32K; docs/kernels.md, "ReLU zeros
            # at the threshold"). The value exponent of the sampled key ranked where the k-th is expected,
            # in a uniform branch; rows that skip it still paid 4-6% at 4 x 9977 on an H100 (not yet explained)
            if (tie != 0) & (thr == 0x80000000):
                zpos = key > thr
                ze, _ = _pick(tl.histogram(tl.where(zpos, (key ^ 0x80000000) >> 23, 0).to(tl.int32), 256,
                                           mask=zpos), tl.maximum((k_eff * S) // L, 1), 256)
        if KTH > 0:
            # the digit scale from the k-th: nbk, the bit length of the distance above thr of the sampled key
            # ranked where the row's k-th key is expected (k S / L samples at or above it; one 64-bin histogram
            # of bit lengths), so that the k-th key's digit lands in 2^(SPAN_BITS-KTH-1)..2^(SPAN_BITS-KTH)
            # whether the values thin out above thr (normal, the model's logits) or not (a uniform row,
            # near_bf16, where the largest sample put the k-th key in the clamped top digit: docs/kernels.md,
            # "The digit scale from the k-th"). Not on a marked row, nor where thr is negative: keys are linear
            # in the value only on one side of zero, and across it both scales crowd the k-th digit
            above = key > thr
            bits = (key - thr).to(tl.float32).to(tl.int32, bitcast=True)
            rk = tl.maximum((k_eff * S) // L, 1)
            if KDIG > 0:
                # the bit length alone puts the sampled k-th anywhere in 64..127, so the true k-th (up to ~2.8x
                # the sampled distance on 8K rows of the families) passed the 255 clamp on ~1 row in 2500, and
                # that row's call took the refine (docs/kernels.md, "no refine at 64-128 rows"). The same one
                # histogram in eighths of an octave (bit length x 8 + the next three bits; every distance
                # below 2^7 in bin 0): the sampled k-th's distance lies in
                # [(128 + 16 m) << (nbk - 8), (144 + 16 m) << (nbk - 8)), m = q8 & 7, and f scales that lower
                # edge to digit KDIG, so the k-th lands in KDIG..1.125 KDIG
                q8, _ = _pick(tl.histogram(tl.where(above, tl.maximum((bits >> 20) - (133 << 3), 0), 0), 256,
                                           mask=above), rk, 256)
                nbk = tl.where(q8 > 0, (q8 >> 3) + 7, 0)
            else:
                nbk, _ = _pick(tl.histogram(tl.where(above, (bits >> 23) - 126, 0), 64, mask=above), rk, 64)
            nbk = tl.where((tie == 0) & ((thr >> 31) == 1), nbk, 0)
            if KDIG > 0:
                f = tl.where(nbk >= 8, (KDIG << 16) // (128 + 16 * (q8 & 7)), f)
    elif L > K:
        # a short row (at most FULL = SMALL values), read whole: thr just below a key t with at least k values
        # at or above it (two histogram levels over the row, so few more than k), every one a candidate
        f_ = tl.arange(0, FULL)
        m = f_ < L
        key = _key(tl.load(x_ptr + row.to(tl.int64) * stride_x + f_, mask=m, other=0.0))
        lo_key = tl.min(tl.where(m, key, tl.full([], 0xFFFFFFFF, tl.uint32)), 0)
        t = _approx_top(key - lo_key, m, k_eff, scr_ptr + row * SMALLTA, SMALLTA, SMALLTA < FULL) + lo_key
        thr = tl.maximum(t, 1) - 1
        if TIE_WHOLE > 0:
            # the same for a row read whole, by exact counts, with its own mark: such a row's unmarked bucket at
            # the k-th key is ranked pairwise by KC (docs/kernels.md, "Rows read whole")
            q = tl.min(tl.where(m & (key >= t), key, tl.full([], 0xFFFFFFFF, tl.uint32)), 0)
            tie = (tl.sum((m & (key == q)).to(tl.int32), 0) > TIE_WHOLE).to(tl.int32)
            thr = tl.where(tie != 0, q, thr)
            if TIE2:
                q2 = tl.min(tl.where(m & (key > thr), key, tl.full([], 0xFFFFFFFF, tl.uint32)), 0)
        span = tl.max(tl.where(m, key, 0), 0) - thr
    # the digit shift: (largest sample - thr) >> sh lands in [2^(SPAN_BITS-1), 2^SPAN_BITS), or with KTH the
    # k-th's distance as above; KB and KC clamp digits to 255, so what lies above shares the last digit
    nb = (span.to(tl.float32).to(tl.int32, bitcast=True) >> 23) - 126
    nb = tl.where(nbk > 0, nbk + KTH, nb)
    sh = tl.where((span > 0) | (nbk > 0), tl.minimum(tl.maximum(nb - SPAN_BITS, 0), 31), 24)
    sh = tl.where(f < 65536, nbk - 8, sh)     # KDIG's rows: the sampled k-th's distance >> sh in 128..255
    tl.store(thr_ptr + row * 4, thr.to(tl.int32, bitcast=True))
    tl.store(thr_ptr + row * 4 + 1, sh | (f << 8))      # the shift and _dig's factor, one word
    tl.store(thr_ptr + row * 4 + 2, tie)
    if TIE2:
        tl.store(t2_ptr + row, q2.to(tl.int32, bitcast=True))
    if VLIN:
        # value-linear digits where thr < 0 lies below a positive largest key: across zero, keys are not linear
        # in the value (the keys of -0.1 and 0.1 are ~2^31 apart, those of 0.1 and 1.9 ~2^25), and both
        # key-linear scales crowd the k-th digit (docs/kernels.md, "The digit scale from the k-th"); the
        # values from thr to the largest span 3/4 of 2^SPAN_BITS digits, as the retired value-digit top-k's did
        top = thr + span
        width = _val(top) - _val(thr)
        use = (tie == 0) & ((thr >> 31) == 0) & ((top >> 31) == 1) & (width > 0) & (width < float("inf"))
        sc = tl.where(use, (3 << (SPAN_BITS - 2)) / tl.where(use, width, 1.0), 0.0)
        if VLIN == 2:
            # a marked row at +0.0 whose sampled k-th is a positive value of exponent ze: digits floor(v 2^(133-ze))
            # put the k-th on 64..127 (values from 4x it share the top digit, all taken)
            sc = tl.where(ze > 0, tl.exp2((133 - tl.maximum(ze, 7)).to(tl.float32)), sc)
        tl.store(thr_ptr + row * 4 + 3, sc.to(tl.int32, bitcast=True))


@triton.jit
def _kb_block(key, offs, m, thr, sh, n_gt, hist, cnt_at, ck_reg, ci_reg, RC, BLOCK: tl.constexpr,
              ATOMIC: tl.constexpr, HREG: tl.constexpr):
    """One block of KB's scan: candidates (key > thr) to the program's region."""
    is_gt = m & (key > thr)
    if ATOMIC:
        # a slot per candidate from the program's own counter (KA zeroed it): no block scan
        p = tl.atomic_add(cnt_at + tl.zeros([BLOCK], dtype=tl.int32), 1, mask=is_gt, sem="relaxed")
    else:
        p = n_gt + tl.cumsum(is_gt.to(tl.int32), 0) - 1
        n_gt += tl.sum(is_gt.to(tl.int32), 0)
    w = is_gt & (p < RC)
    tl.store(ck_reg + p, key.to(tl.int32, bitcast=True), mask=w)
    tl.store(ci_reg + p, offs, mask=w)
    if HREG:
        hist += tl.histogram(tl.minimum((key - thr) >> sh, 255).to(tl.int32), 256, mask=is_gt)
    return n_gt, hist


# KB's candidate step for 4 values of a thread, in PTX (a GPU only): each value's test is balloted across the
# warp, lane 0 takes the warp's slots with one atomic, and each thread stores its own candidates (key, index)
# at base + #(candidates of the lanes below it); a thread with none skips the stores. Slots at or past rc are
# counted but not written (the overflow KC detects). Returns 0s (the op exists for its side effects).
_WARP_SLOTS_PTX = tl.constexpr("""
{
.reg .pred q0, q1, q2, q3, p, any;
.reg .b32 b0, b1, b2, b3, lt, c, pre, tot, base, s;
.reg .b64 w, a;
mov.u32 $0, 0;
mov.u32 $1, 0;
mov.u32 $2, 0;
mov.u32 $3, 0;
setp.gt.u32 q0, $4, $12;
setp.gt.u32 q1, $5, $13;
setp.gt.u32 q2, $6, $14;
setp.gt.u32 q3, $7, $15;
vote.sync.ballot.b32 b0, q0, -1;
vote.sync.ballot.b32 b1, q1, -1;
vote.sync.ballot.b32 b2, q2, -1;
vote.sync.ballot.b32 b3, q3, -1;
or.b32 c, b0, b1;
or.b32 c, c, b2;
or.b32 c, c, b3;
setp.eq.u32 p, c, 0;
@p bra.uni DONE;
popc.b32 tot, b0;
popc.b32 c, b1;
add.u32 tot, tot, c;
popc.b32 c, b2;
add.u32 tot, tot, c;
popc.b32 c, b3;
add.u32 tot, tot, c;
mov.u32 lt, %lanemask_lt;
and.b32 c, b0, lt;
popc.b32 pre, c;
and.b32 c, b1, lt;
popc.b32 c, c;
add.u32 pre, pre, c;
and.b32 c, b2, lt;
popc.b32 c, c;
add.u32 pre, pre, c;
and.b32 c, b3, lt;
popc.b32 c, c;
add.u32 pre, pre, c;
mov.u32 s, %laneid;
setp.eq.u32 p, s, 0;
mov.u32 base, 0;
@p atom.global.add.u32 base, [$16], tot;
shfl.sync.idx.b32 base, base, 0, 31, -1;
or.pred any, q0, q1;
or.pred any, any, q2;
or.pred any, any, q3;
@!any bra DONE;
add.u32 s, base, pre;
setp.lt.and.u32 p, s, $28, q0;
mul.wide.u32 w, s, 4;
@p add.s64 a, $20, w;
@p st.global.u32 [a], $4;
@p add.s64 a, $24, w;
@p st.global.u32 [a], $8;
selp.u32 c, 1, 0, q0;
add.u32 s, s, c;
setp.lt.and.u32 p, s, $29, q1;
mul.wide.u32 w, s, 4;
@p add.s64 a, $21, w;
@p st.global.u32 [a], $5;
@p add.s64 a, $25, w;
@p st.global.u32 [a], $9;
selp.u32 c, 1, 0, q1;
add.u32 s, s, c;
setp.lt.and.u32 p, s, $30, q2;
mul.wide.u32 w, s, 4;
@p add.s64 a, $22, w;
@p st.global.u32 [a], $6;
@p add.s64 a, $26, w;
@p st.global.u32 [a], $10;
selp.u32 c, 1, 0, q2;
add.u32 s, s, c;
setp.lt.and.u32 p, s, $31, q3;
mul.wide.u32 w, s, 4;
@p add.s64 a, $23, w;
@p st.global.u32 [a], $7;
@p add.s64 a, $27, w;
@p st.global.u32 [a], $11;
DONE:
}
""")


@triton.jit
def _kb_block_warp(key, offs, thr, cnt_at, ck_reg, ci_reg, RC, BLOCK: tl.constexpr):
    """One block of KB's scan with the warp-ballot slots (_WARP_SLOTS_PTX): candidates (key > thr) to the
    program's region. Masked-off values must come with key 0 (never a candidate)."""
    z = tl.zeros([BLOCK], dtype=tl.int32)
    tl.inline_asm_elementwise(
        _WARP_SLOTS_PTX,
        "=r,=r,=r,=r,r,r,r,r,r,r,r,r,r,r,r,r,l,l,l,l,l,l,l,l,l,l,l,l,r,r,r,r",
        [key, offs, z.to(tl.uint32) + thr, (cnt_at + z).to(tl.int64), (ck_reg + z).to(tl.int64),
         (ci_reg + z).to(tl.int64), z + RC],
        dtype=tl.int32, is_pure=False, pack=4)


@triton.jit
def _kb_take(key, offs, m, thr, sh, n_gt, hist, cnt_at, ck_reg, ci_reg, RC, BLOCK: tl.constexpr,
             ATOMIC: tl.constexpr, HREG: tl.constexpr, WARP: tl.constexpr, WHOLE: tl.constexpr):
    """One block of KB's scan, the warp-ballot slots (WARP) or Triton's; WHOLE: every value is in the row
    (m is all true, and the warp path needs no masked keys)."""
    if WARP:
        if WHOLE:
            _kb_block_warp(key, offs, thr, cnt_at, ck_reg, ci_reg, RC, BLOCK)
        else:
            _kb_block_warp(tl.where(m, key, 0), offs, thr, cnt_at, ck_reg, ci_reg, RC, BLOCK)
    else:
        n_gt, hist = _kb_block(key, offs, m, thr, sh, n_gt, hist, cnt_at, ck_reg, ci_reg, RC, BLOCK, ATOMIC, HREG)
    return n_gt, hist


@triton.jit
def _kb_eq(eqv, key, m, thr, tie):
    """eqv + the values equal to thr, on a row that KA marked a tie (nothing otherwise)."""
    if tie != 0:
        eqv += (m & (key == thr)).to(tl.int32)
    return eqv


@triton.jit(do_not_specialize=NO_SPEC)
def _kb_filter(x_ptr, stride_x, len_ptr, thr_ptr, t2_ptr, cnt_ptr, eq_ptr, g2_ptr, ck_ptr, ci_ptr, hist_ptr, rh_ptr,
               N, K, C, RC, BLOCK: tl.constexpr, ATOMIC: tl.constexpr, HB: tl.constexpr, HREG: tl.constexpr,
               PF: tl.constexpr, PDL: tl.constexpr, WARP: tl.constexpr, VLIN: tl.constexpr, TIE2: tl.constexpr):
    row = tl.program_id(0)
    c = tl.program_id(1)
    x_row = x_ptr + row.to(tl.int64) * stride_x
    reg = (row * C + c).to(tl.int64) * RC
    cnt_at = cnt_ptr + row * C + c
    L, _ = _row_len(len_ptr, row, N, K)
    ch = tl.cdiv(tl.cdiv(L, C), 64) * 64      # each row split evenly over its C programs
    lo = tl.multiple_of(c * ch, 64)
    hi = tl.minimum(lo + ch, L)
    n_gt = 0
    hist = tl.zeros([256], dtype=tl.int32)
    ck_reg = ck_ptr + reg
    ci_reg = ci_ptr + reg
    # whole blocks load unmasked: a mask against the row's length (any value) would split every load into
    # 4-byte ones; lo is a multiple of 64 and so is every start, so these loads are 16 bytes wide
    mid = lo + tl.maximum(hi - lo, 0) // BLOCK * BLOCK
    ar = tl.arange(0, BLOCK)
    if PF:
        # the first PF blocks' loads go out before the wait for KA (the logits are the caller's input)
        nxt = tl.load(x_row + lo + ar, mask=ar < mid - lo, other=0.0)
    if PF == 2:
        nxt2 = tl.load(x_row + lo + BLOCK + ar, mask=ar + BLOCK < mid - lo, other=0.0)
    if PDL:
        tl.extra.cuda.gdc_wait()       # KA's threshold, zeroed counters and row histogram are visible after this
        tl.extra.cuda.gdc_launch_dependents()
    thr = tl.load(thr_ptr + row * 4).to(tl.uint32, bitcast=True)
    shf = tl.load(thr_ptr + row * 4 + 1)
    sh = (shf & 255).to(tl.uint32)
    f = (shf >> 8).to(tl.uint32)
    tie = tl.load(thr_ptr + row * 4 + 2)
    sc = tl.load(thr_ptr + row * 4 + 3).to(tl.float32, bitcast=True) if VLIN else 0.0
    eqv = tl.zeros([BLOCK], dtype=tl.int32)       # a tie row's copies of thr (KA's mode-3 hint), per lane
    if PF == 2:
        # two blocks in flight while one is filtered: more bytes in flight per program
        for start in range(lo, mid, BLOCK):
            cur = nxt
            nxt = nxt2
            offs = start + ar
            nxt2 = tl.load(x_row + offs + 2 * BLOCK, mask=offs + 2 * BLOCK < mid, other=0.0)
            key = _key(cur)
            n_gt, hist = _kb_take(key, offs, offs < hi, thr, sh, n_gt, hist, cnt_at, ck_reg, ci_reg, RC,
                                  BLOCK, ATOMIC, HREG, WARP, True)
            eqv = _kb_eq(eqv, key, offs < hi, thr, tie)
    elif PF:
        # the next block's load is issued before this block's slots are taken (an atomic's or a scan's
        # latency), so the two overlap; masks against mid keep 16-byte loads (mid - lo is whole blocks)
        for start in range(lo, mid, BLOCK):
            cur = nxt
            offs = start + ar
            nxt = tl.load(x_row + offs + BLOCK, mask=offs + BLOCK < mid, other=0.0)
            key = _key(cur)
            n_gt, hist = _kb_take(key, offs, offs < hi, thr, sh, n_gt, hist, cnt_at, ck_reg, ci_reg, RC,
                                  BLOCK, ATOMIC, HREG, WARP, True)
            eqv = _kb_eq(eqv, key, offs < hi, thr, tie)
    else:
        for start in range(lo, mid, BLOCK):
            offs = start + ar
            key = _key(tl.load(x_row + offs))
            n_gt, hist = _kb_take(key, offs, offs < hi, thr, sh, n_gt, hist, cnt_at, ck_reg,
                                  ci_reg, RC, BLOCK, ATOMIC, HREG, WARP, True)
            eqv = _kb_eq(eqv, key, offs < hi, thr, tie)
    if mid < hi:
        offs = mid + ar
        m = offs < hi
        key = _key(tl.load(x_row + offs, mask=m, other=0.0))
        n_gt, hist = _kb_take(key, offs, m, thr, sh, n_gt, hist, cnt_at,
                              ck_reg, ci_reg, RC, BLOCK, ATOMIC, HREG, WARP, False)
        eqv = _kb_eq(eqv, key, m, thr, tie)
    tl.store(eq_ptr + row * C + c, tl.sum(eqv, 0))
    if ATOMIC or WARP:
        tl.debug_barrier()
        n_gt = tl.atomic_add(cnt_at, 0)          # the final count, after every program's atomics
    else:
        tl.store(cnt_at, n_gt)
    if not HREG:
        # the row-wide digit histogram of this program's candidates, re-read from its region; with TIE2, on a
        # marked row, also its candidates above and equal to q2, the smallest key KA saw above thr (KD's mode 4)
        tl.debug_barrier()
        q2 = tl.load(t2_ptr + row).to(tl.uint32, bitcast=True) if TIE2 else 0
        n_a2 = 0
        n_e2 = 0
        for s in range(0, tl.minimum(n_gt, RC), HB):
            o = s + tl.arange(0, HB)
            m = o < tl.minimum(n_gt, RC)
            key = tl.load(ck_ptr + reg + o, mask=m, other=0).to(tl.uint32, bitcast=True)
            hist += tl.histogram(_dig(key, thr, sh, f, sc, VLIN), 256, mask=m)
            if TIE2:
                if tie != 0:
                    n_a2 += tl.sum((m & (key > q2)).to(tl.int32), 0)
                    n_e2 += tl.sum((m & (key == q2)).to(tl.int32), 0)
        if TIE2:
            if tie != 0:
                tl.store(g2_ptr + (row * C + c) * 2, n_a2)
                tl.store(g2_ptr + (row * C + c) * 2 + 1, n_e2)
    # the row's digit histogram (integer atomics: exact, order-free) and this program's suffix counts
    # #(digit >= b), from which KD reads its offsets in two columns
    hb = tl.arange(0, 256)
    tl.atomic_add(rh_ptr + row * 256 + hb, hist, mask=hist > 0, sem="relaxed")
    tl.store(hist_ptr + (row * C + c) * 256 + hb, tl.cumsum(hist, 0, reverse=True))


@triton.jit
def _rank_store(rs, cnt, k_rem, o_at, R: tl.constexpr, SMALLR: tl.constexpr):
    """The first k_rem of the cnt <= R (key, index) pairs at rs (keys) and rs + SMALLR (indices), ordered
    by key descending then index ascending, each ranked against all R in 64 x R tiles; their indices
    go to o_at."""
    oj = tl.arange(0, R)
    mj = oj < cnt
    kj = tl.load(rs + oj, mask=mj, other=0).to(tl.uint32, bitcast=True)[None, :]
    ij = tl.load(rs + SMALLR + oj, mask=mj, other=0)[None, :]
    done = 0
    for i0 in range(0, cnt, 64):
        oi = i0 + tl.arange(0, 64)
        mi = oi < cnt
        ki = tl.load(rs + oi, mask=mi, other=0).to(tl.uint32, bitcast=True)[:, None]
        ii = tl.load(rs + SMALLR + oi, mask=mi, other=0)
        ahead = mj[None, :] & ((kj > ki) | ((kj == ki) & (ij < ii[:, None])))
        sel = mi & (tl.sum(ahead.to(tl.int32), 1) < k_rem)
        cs = tl.cumsum(sel.to(tl.int32), 0)
        tl.store(o_at + done + cs - 1, ii, mask=sel)
        done += tl.sum(sel.to(tl.int32), 0)


@triton.jit
def _sort_store(rs, cnt, k_rem, o_at, SMALLR: tl.constexpr):
    """_rank_store's answer by one sort instead of pairwise ranks: each of the cnt <= SMALLR pairs as one 64-bit
    word, the key's complement above the index (ascending order is key descending, then index ascending), the
    unused slots last; the first k_rem words' indices go to o_at."""
    oj = tl.arange(0, SMALLR)
    mj = oj < cnt
    kj = tl.load(rs + oj, mask=mj, other=0).to(tl.uint32, bitcast=True).to(tl.uint64)
    ij = tl.load(rs + SMALLR + oj, mask=mj, other=0).to(tl.uint32, bitcast=True).to(tl.uint64)
    word = tl.where(mj, ((0xFFFFFFFF - kj) << 32) | ij, tl.full([SMALLR], 0xFFFFFFFFFFFFFFFF, tl.uint64))
    first = tl.sort(word, 0)
    tl.store(o_at + oj, (first & 0xFFFFFFFF).to(tl.int32), mask=oj < k_rem)


@triton.jit
def _tie_quota(eqs, need):
    """How many copies of a tie each program takes: the first min(eqs_c, t - 1) of its own, and one more for the
    first programs (by index) that have t, for the smallest t with sum(min(eqs, t)) >= need (<= sum(eqs)).
    The same table on every program of the row: a deterministic set, each program's share near need / C."""
    lo = tl.zeros([], dtype=tl.int32)
    hi = tl.max(eqs, 0)
    for _i in tl.static_range(31):          # binary search: the counts are below 2^31
        mid = (lo + hi) // 2
        enough = tl.sum(tl.minimum(eqs, mid), 0) >= need
        hi = tl.where(enough, mid, hi)
        lo = tl.where(enough, lo, mid + 1)
    take = tl.minimum(eqs, hi - 1)
    more = eqs >= hi
    rank = tl.cumsum(more.to(tl.int32), 0) - 1       # among the programs that can take one more
    return take + (more & (rank < need - tl.sum(take, 0))).to(tl.int32)


@triton.jit
def _kd_split(key, idx, live, thr, sh, f, sc, dsel, o_at, rs_at, SMALLR: tl.constexpr, VLIN: tl.constexpr):
    """Mode 2's placement of one chunk of a region: its candidates of a digit above dsel to o_at, dsel's
    members (key, index) to the rank scratch at rs_at, each in region order; how many of each."""
    dg = _dig(key, thr, sh, f, sc, VLIN)
    gt = live & (dg > dsel)
    inb = live & (dg == dsel)
    v = tl.cumsum(gt.to(tl.int32) + (inb.to(tl.int32) << 16), 0)   # both positions in one scan
    tl.store(o_at + (v & 65535) - 1, idx, mask=gt)
    rs = rs_at + (v >> 16) - 1
    tl.store(rs, key.to(tl.int32, bitcast=True), mask=inb)
    tl.store(rs + SMALLR, idx, mask=inb)
    return tl.sum(gt.to(tl.int32), 0), tl.sum(inb.to(tl.int32), 0)


@triton.jit
def _kd_take(idx, sel, o_at):
    """idx[sel] to o_at, in order; how many."""
    tl.store(o_at + tl.cumsum(sel.to(tl.int32), 0) - 1, idx, mask=sel)
    return tl.sum(sel.to(tl.int32), 0)


@triton.jit
def _kd_copies(x_row, c, C, L, T, o_at, mine, TB: tl.constexpr):
    """The first `mine` values of key T in program c's part of the row (KB's split), in index order, to o_at."""
    ch = tl.cdiv(tl.cdiv(L, C), 64) * 64
    lo = c * ch
    hi = tl.minimum(lo + ch, L)
    taken = 0
    for start in range(lo, hi, TB):
        if taken < mine:
            offs = start + tl.arange(0, TB)
            m = offs < hi
            eq = m & (_key(tl.load(x_row + offs, mask=m, other=0.0)) == T)
            e = taken + tl.cumsum(eq.to(tl.int32), 0)
            tl.store(o_at + e - 1, offs, mask=eq & (e <= mine))
            taken += tl.sum(eq.to(tl.int32), 0)


@triton.jit(do_not_specialize=NO_SPEC + ["stride_x"])    # its one read of the logits (mode 3) is not the hot loop
def _kd_place(x_ptr, stride_x, len_ptr, thr_ptr, t2_ptr, cnt_ptr, eq_ptr, g2_ptr, ck_ptr, ci_ptr, hist_ptr, rh_ptr,
              rscr_ptr, info_ptr, rl_ptr, rr_ptr, out_ptr, stride_o, N, K, C, RC, RR: tl.constexpr, CB: tl.constexpr,
              RT: tl.constexpr, SMALLR: tl.constexpr, PDL: tl.constexpr, EARLY: tl.constexpr, TB: tl.constexpr,
              VLIN: tl.constexpr, TIE2: tl.constexpr):
    """grid (M, C): KC's two common cases spread over the row's C programs, each placing its own region.
    Every program of a row reads the same counts and tables and so reaches the same decision:
      mode 1, n_gt == k_eff: every candidate, at the offset of the regions before it.
      mode 2, path A with a chosen digit dsel < 255 of at most SMALLR members: its candidates of a larger
        digit go to the output, its members of dsel to the row's rank scratch, at offsets read from two columns
        of the suffix counts of the programs before it (no atomics: deterministic). KC ranks the members.
      mode 3, a row KA marked a tie at thr (more than TIE copies of it, by the sample) with
        n_gt < k_eff <= n_gt + #(key == thr): every candidate as in mode 1, then k_eff - n_gt copies of thr,
        spread over the programs by the counts KB took (_tie_quota): each takes the first ones of its part.
      mode 4 (TIE2), a marked row whose candidates are q2 (the smallest key KA saw above thr) and keys above it,
        with n_a2 < k_eff <= n_a2 + #(key == q2): the n_a2 above q2, then copies of q2 as mode 3 takes thr's
        (the ties family at 32K: the k-th in the top bucket of ~k copies, over SMALLR members for mode 2).
      mode 0: anything else (a region overflowed, too few candidates, a big or top digit bin): the refine
        kernels (_r_hist, _r_place) select the row over all its C programs; program 0 zeroes their scratch.
    Program 0 of the row records the mode, k_rem and the member count for KC.
    EARLY: the region's RT slots load right after the wait, unmasked, beside the counts (one round trip less);
    the slots past the program's count hold stale values that the masks drop."""
    if PDL:
        tl.extra.cuda.gdc_wait()       # KB's regions, counts and tables
        tl.extra.cuda.gdc_launch_dependents()
    row = tl.program_id(0)
    c = tl.program_id(1)
    o = tl.arange(0, RT)
    reg = (row * C + c).to(tl.int64) * RC
    if EARLY:
        idx_e = tl.load(ci_ptr + reg + o)
        key_e = tl.load(ck_ptr + reg + o).to(tl.uint32, bitcast=True)
    L, k_eff = _row_len(len_ptr, row, N, K)
    thr = tl.load(thr_ptr + row * 4).to(tl.uint32, bitcast=True)
    shf = tl.load(thr_ptr + row * 4 + 1)
    sh = (shf & 255).to(tl.uint32)
    f = (shf >> 8).to(tl.uint32)
    sc = tl.load(thr_ptr + row * 4 + 3).to(tl.float32, bitcast=True) if VLIN else 0.0
    cs_ = tl.arange(0, CB)
    cmask = cs_ < C
    gts = tl.load(cnt_ptr + row * C + cs_, mask=cmask, other=0)
    n_gt = tl.sum(gts, 0)
    dsel, k_rem, cnt = _pick_n(tl.load(rh_ptr + row * 256 + tl.arange(0, 256)), k_eff, 256)
    ok = tl.max(gts, 0) <= RC
    eqs = tl.load(eq_ptr + row * C + cs_, mask=cmask, other=0)    # 0 unless KA marked a tie
    n_eq = tl.sum(eqs, 0)
    mode = tl.where(ok & (n_gt == k_eff), 1, tl.where(ok & (n_gt > k_eff) & (dsel < 255) & (cnt <= SMALLR), 2,
                    tl.where(ok & (n_gt < k_eff) & (n_gt + n_eq >= k_eff), 3, 0)))
    if TIE2:
        tie = tl.load(thr_ptr + row * 4 + 2)
        q2 = tl.load(t2_ptr + row).to(tl.uint32, bitcast=True)
        a2s = tl.where(tie != 0, tl.load(g2_ptr + (row * C + cs_) * 2, mask=cmask, other=0), 0)   # KB wrote
        e2s = tl.where(tie != 0, tl.load(g2_ptr + (row * C + cs_) * 2 + 1, mask=cmask, other=0), 0)  # marked rows
        n_a2 = tl.sum(a2s, 0)
        n_e2 = tl.sum(e2s, 0)
        mode = tl.where((mode == 0) & ok & (tie != 0) & (n_gt > k_eff) & (n_a2 + n_e2 == n_gt) & (n_a2 < k_eff),
                        4, mode)
    if c == 0:
        if mode == 0:
            rb = tl.arange(0, 1024)
            tl.store(rr_ptr + row * RR + rb, tl.zeros([1024], dtype=tl.int32))      # the four level histograms
            tl.store(rr_ptr + row * RR + 1024, 0)                                   # keys above the k-th placed
            tl.store(rl_ptr + 1 + tl.atomic_add(rl_ptr, 1, sem="relaxed"), row)     # the refine's row list
        tl.store(info_ptr + row * 4, mode)
        tl.store(info_ptr + row * 4 + 1, k_rem)
        tl.store(info_ptr + row * 4 + 2, cnt)
    if mode != 0:
        before = cs_ < c
        n_c = tl.sum(tl.where(cs_ == c, gts, 0), 0)
        live = o < n_c
        o_row = out_ptr + row.to(tl.int64) * stride_o
        if EARLY:
            idx = idx_e
        else:
            idx = tl.load(ci_ptr + reg + o, mask=live, other=0)
        if (mode == 1) | (mode == 3):
            off = tl.sum(tl.where(before, gts, 0), 0)
            tl.store(o_row + off + o, idx, mask=live)
            # a region of more than RT candidates (RC > RT: ~1 program in 10^4 at C = 16), in chunks of RT
            for b in range(RT, n_c, RT):
                lv = b + o < n_c
                tl.store(o_row + off + b + o, tl.load(ci_ptr + reg + b + o, mask=lv, other=0), mask=lv)
            if mode == 3:
                # thr's copies after the n_gt candidates: the need = k_eff - n_gt of them spread over the
                # programs (each takes the first take_c copies of its own part), so that each reads about
                # need / C of them instead of the first programs reading their whole parts
                need = k_eff - n_gt
                take = _tie_quota(eqs, need)
                off_t = n_gt + tl.sum(tl.where(before, take, 0), 0)
                mine = tl.sum(tl.where(cs_ == c, take, 0), 0)
                _kd_copies(x_ptr + row.to(tl.int64) * stride_x, c, C, L, thr, o_row + off_t, mine, TB)
        elif mode == 2:
            if EARLY:
                key = key_e
            else:
                key = tl.load(ck_ptr + reg + o, mask=live, other=0).to(tl.uint32, bitcast=True)
            # suffix counts of the programs before this one at dsel + 1 (above dsel) and dsel
            sfx = hist_ptr + (row * C + cs_) * 256
            s_gt = tl.load(sfx + dsel + 1, mask=before, other=0)
            off_gt = tl.sum(s_gt, 0)
            off_eq = tl.sum(tl.load(sfx + dsel, mask=before, other=0) - s_gt, 0)
            rs = rscr_ptr + row * 2 * SMALLR + off_eq
            n_g, n_e = _kd_split(key, idx, live, thr, sh, f, sc, dsel, o_row + off_gt, rs, SMALLR, VLIN)
            for b in range(RT, n_c, RT):
                lv = b + o < n_c
                key_b = tl.load(ck_ptr + reg + b + o, mask=lv, other=0).to(tl.uint32, bitcast=True)
                idx_b = tl.load(ci_ptr + reg + b + o, mask=lv, other=0)
                g_b, e_b = _kd_split(key_b, idx_b, lv, thr, sh, f, sc, dsel, o_row + off_gt + n_g, rs + n_e,
                                     SMALLR, VLIN)
                n_g += g_b
                n_e += e_b
        if TIE2:
            if mode == 4:
                # the candidates above q2 (region order, after those of the programs before it), then q2's
                # copies as mode 3 takes thr's
                off = tl.sum(tl.where(before, a2s, 0), 0)
                if EARLY:
                    key = key_e
                else:
                    key = tl.load(ck_ptr + reg + o, mask=live, other=0).to(tl.uint32, bitcast=True)
                n_ab = _kd_take(idx, live & (key > q2), o_row + off)
                for b in range(RT, n_c, RT):
                    lv = b + o < n_c
                    key_b = tl.load(ck_ptr + reg + b + o, mask=lv, other=0).to(tl.uint32, bitcast=True)
                    idx_b = tl.load(ci_ptr + reg + b + o, mask=lv, other=0)
                    n_ab += _kd_take(idx_b, lv & (key_b > q2), o_row + off + n_ab)
                take = _tie_quota(e2s, k_eff - n_a2)
                off_t = n_a2 + tl.sum(tl.where(before, take, 0), 0)
                mine = tl.sum(tl.where(cs_ == c, take, 0), 0)
                _kd_copies(x_ptr + row.to(tl.int64) * stride_x, c, C, L, q2, o_row + off_t, mine, TB)


@triton.jit(do_not_specialize=NO_SPEC)
def _kc_select(len_ptr, rscr_ptr, info_ptr, out_ptr, stride_o, N, K, KBLOCK: tl.constexpr, SMALLR: tl.constexpr,
               MID: tl.constexpr, PDL: tl.constexpr, SORT: tl.constexpr):
    """grid (M,): mode 2 ranks dsel's members (at most SMALLR; up to MID of them in 64 x MID tiles, where MID > 0;
    SORT: more than 64 of them by one sort, docs/kernels.md "A tie bucket ranked by one sort"); every row gets its
    -1 padding."""
    if PDL:
        tl.extra.cuda.gdc_wait()       # KD's placements and decisions
        tl.extra.cuda.gdc_launch_dependents()
    row = tl.program_id(0)
    o_row = out_ptr + row.to(tl.int64) * stride_o
    L, k_eff = _row_len(len_ptr, row, N, K)
    if tl.load(info_ptr + row * 4) == 2:
        k_rem = tl.load(info_ptr + row * 4 + 1)
        cnt = tl.load(info_ptr + row * 4 + 2)
        rs = rscr_ptr + row * 2 * SMALLR
        if cnt <= 64:
            _rank_store(rs, cnt, k_rem, o_row + (k_eff - k_rem), 64, SMALLR)
        elif SORT:
            _sort_store(rs, cnt, k_rem, o_row + (k_eff - k_rem), SMALLR)
        elif MID > 0 and cnt <= MID:
            _rank_store(rs, cnt, k_rem, o_row + (k_eff - k_rem), MID, SMALLR)
        else:
            _rank_store(rs, cnt, k_rem, o_row + (k_eff - k_rem), SMALLR, SMALLR)
    for start in range(0, K, KBLOCK):
        o3 = start + tl.arange(0, KBLOCK)
        tl.store(o_row + o3, tl.full([KBLOCK], -1, tl.int32), mask=(o3 >= k_eff) & (o3 < K))


# The refine (mode-0 rows only; the programs of every other row return at once): an exact radix select over
# the row's keys, four 8-bit digits from the top, each digit's histogram built by all C programs of the row
# (integer atomics into rr), then one placement pass by the same programs. No sample, so nothing can miss;
# every pass costs the row's length divided by C. rr[row]: 4 x 256 level histograms, then the count of keys
# above the k-th placed so far. Ties at the k-th key go by index: program c takes them after the equal keys
# of the programs before it (their level-4 histograms, kept per program in hist_ptr). When the largest key of
# the k-th key's bucket has enough copies, that key is T and the levels after it return at once (_r_top).
RS = tl.constexpr(1040)     # rr[row]: 4 x 256 level histograms, the placed count; the levels' records from here


@triton.jit
def _r_prefix(rr_row, k_eff, LEVEL: tl.constexpr):
    """The key prefix of the k-th largest fixed by the first LEVEL digits, its mask, and how many keys
    of that prefix belong to the top k_eff."""
    prefix = tl.zeros([], dtype=tl.uint32)
    pmask = tl.zeros([], dtype=tl.uint32)
    k_rem = k_eff
    for lv in tl.static_range(LEVEL):
        dsel, k_rem = _pick(tl.load(rr_row + lv * 256 + tl.arange(0, 256)), k_rem, 256)
        prefix = prefix | (dsel.to(tl.uint32) << (24 - 8 * lv))
        pmask = pmask | tl.full([], 255 << (24 - 8 * lv), tl.uint32)
    return prefix, pmask, k_rem


@triton.jit
def _r_count(dg, m, hist):
    """hist + the histogram of dg[m]; a block whose digits are all one (a tie bucket, a row of one exponent) is
    counted by one reduction instead (measured on the H200: the refine of the ties family 252 -> 167 us at
    64 x 128K; a compare-and-sum over the 16 bins next to it cost more than tl.histogram)."""
    lo = tl.min(tl.where(m, dg, 256), 0)
    hi = tl.max(tl.where(m, dg, -1), 0)
    if lo == hi:
        hist += tl.where(tl.arange(0, 256) == lo, tl.sum(m.to(tl.int32), 0), 0)
    elif hi >= 0:
        hist += tl.histogram(dg, 256, mask=m)
    return hist


@triton.jit
def _r_top(rr_row, k_eff, C, UPTO: tl.constexpr, CB: tl.constexpr):
    """Whether one of the levels before UPTO already fixed the k-th key T: each level records, per program, the
    largest key it counted (the keys of the k-th key's bucket so far) and how many of it; when the bucket's
    largest key has at least as many copies as the top k still takes from the bucket, T is that key (a tie
    bucket at the k-th key: ties on every row, ReLU zeros). Returns found, T, how many of T to take, and
    each program's count of T."""
    cs_ = tl.arange(0, CB)
    found = tl.zeros([], dtype=tl.int32)
    t = tl.zeros([], dtype=tl.uint32)
    need = tl.zeros([], dtype=tl.int32)
    per_t = tl.zeros([CB], dtype=tl.int32)
    k_rem = k_eff                   # how many the top k still takes from level lv's bucket (as _r_prefix counts)
    for lv in tl.static_range(UPTO):
        at = rr_row + RS + lv * 2 * CB + 2 * cs_
        km = tl.load(at, mask=cs_ < C, other=0).to(tl.uint32, bitcast=True)
        cm = tl.load(at + 1, mask=cs_ < C, other=0)
        mx = tl.max(tl.where(cm > 0, km, 0), 0)
        per = tl.where((cm > 0) & (km == mx), cm, 0)
        hit = (found == 0) & (k_rem > 0) & (tl.sum(per, 0) >= k_rem)
        t = tl.where(hit, mx, t)
        need = tl.where(hit, k_rem, need)
        per_t = tl.where(hit, per, per_t)
        found = tl.where(hit, 1, found)
        if lv + 1 < UPTO:
            dsel, k_rem = _pick(tl.load(rr_row + lv * 256 + tl.arange(0, 256)), k_rem, 256)
    return found, t, need, per_t


@triton.jit
def _r_hist_row(x_ptr, stride_x, len_ptr, info_ptr, rr_ptr, hist_ptr, row, c, N, K, C, RR: tl.constexpr,
                LEVEL: tl.constexpr, CB: tl.constexpr, BLOCK: tl.constexpr):
    """Program c's part of row's digit LEVEL (bits 31-8 LEVEL .. 24-8 LEVEL) of the keys that match the prefix so
    far, and (levels 0-2) its largest such key and its count; a level after one that fixed the k-th key (_r_top)
    returns at once."""
    rr_row = rr_ptr + row * RR
    L, k_eff = _row_len(len_ptr, row, N, K)
    go = tl.load(info_ptr + row * 4) == 0      # every other row's programs return after these two loads
    if LEVEL >= 1:
        if go:
            found, t_found, need_found, per_found = _r_top(rr_row, k_eff, C, LEVEL, CB)   # only `found` is used
            go = found == 0
    if go:
        prefix, pmask, _ = _r_prefix(rr_row, k_eff, LEVEL)
        x_row = x_ptr + row.to(tl.int64) * stride_x
        ch = tl.cdiv(tl.cdiv(L, C), 64) * 64
        lo = tl.multiple_of(c * ch, 64)
        hi = tl.minimum(lo + ch, L)
        hist = tl.zeros([256], dtype=tl.int32)
        kmax = tl.zeros([], dtype=tl.uint32)
        cmax = tl.zeros([], dtype=tl.int32)
        for start in range(lo, hi, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            m = offs < hi
            key = _key(tl.load(x_row + offs, mask=m, other=0.0))
            mm = m & ((key & pmask) == prefix)
            hist = _r_count(((key >> (24 - 8 * LEVEL)) & 255).to(tl.int32), mm, hist)
            if LEVEL < 3:
                bmax = tl.max(tl.where(mm, key, 0), 0)
                bcnt = tl.sum((mm & (key == bmax)).to(tl.int32), 0)
                new = tl.maximum(kmax, bmax)
                cmax = tl.where(kmax == new, cmax, 0) + tl.where(bmax == new, bcnt, 0)
                kmax = new
        hb = tl.arange(0, 256)
        tl.atomic_add(rr_row + LEVEL * 256 + hb, hist, mask=hist > 0, sem="relaxed")
        if LEVEL < 3:
            at = rr_row + RS + LEVEL * 2 * CB + 2 * c
            tl.store(at, kmax.to(tl.int32, bitcast=True))
            tl.store(at + 1, cmax)
        if LEVEL == 3:
            tl.store(hist_ptr + (row * C + c) * 256 + hb, hist)     # this program's keys per last digit


@triton.jit(do_not_specialize=NO_SPEC + ["P"])
def _r_hist(x_ptr, stride_x, len_ptr, info_ptr, rl_ptr, rr_ptr, hist_ptr, N, K, C, P, RR: tl.constexpr,
            LEVEL: tl.constexpr, CB: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr, RLIST: tl.constexpr):
    """grid (M, C): program (row, c) takes part c of its row, which returns at once unless KD chose the refine;
    with RLIST grid (P, C): program (p, c) takes part c of the listed rows p, p + P, ... (none: no work)."""
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    if RLIST:
        for i in range(tl.program_id(0), tl.load(rl_ptr), P):
            _r_hist_row(x_ptr, stride_x, len_ptr, info_ptr, rr_ptr, hist_ptr, tl.load(rl_ptr + 1 + i),
                        tl.program_id(1), N, K, C, RR, LEVEL, CB, BLOCK)
    else:
        _r_hist_row(x_ptr, stride_x, len_ptr, info_ptr, rr_ptr, hist_ptr, tl.program_id(0), tl.program_id(1),
                    N, K, C, RR, LEVEL, CB, BLOCK)


@triton.jit
def _r_place_row(x_ptr, stride_x, len_ptr, info_ptr, rr_ptr, hist_ptr, out_ptr, stride_o, row, c, N, K, C,
                 RR: tl.constexpr, CB: tl.constexpr, BLOCK: tl.constexpr):
    """Program c's part of row: keys above the k-th key T to the output's first n_gt slots (a slot block per
    block from the row's counter: the set is fixed, only its order varies); keys equal to T in index order
    after n_gt."""
    if tl.load(info_ptr + row * 4) == 0:
        L, k_eff = _row_len(len_ptr, row, N, K)
        rr_row = rr_ptr + row * RR
        cs_ = tl.arange(0, CB)
        found, t_top, need_top, per_t = _r_top(rr_row, k_eff, C, 3, CB)
        if found:       # an earlier level fixed T; per_t: each program's count of T
            t = t_top
            need = need_top
            taken = tl.sum(tl.where(cs_ < c, per_t, 0), 0)
        else:
            t, pmask4, need = _r_prefix(rr_row, k_eff, 4)
            eq_before = tl.load(hist_ptr + (row * C + cs_) * 256 + (t & 255).to(tl.int32), mask=cs_ < c, other=0)
            taken = tl.sum(eq_before, 0)            # keys == t in the programs before this one
        n_gt = k_eff - need
        x_row = x_ptr + row.to(tl.int64) * stride_x
        o_row = out_ptr + row.to(tl.int64) * stride_o
        ch = tl.cdiv(tl.cdiv(L, C), 64) * 64
        lo = tl.multiple_of(c * ch, 64)
        hi = tl.minimum(lo + ch, L)
        for start in range(lo, hi, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            m = offs < hi
            key = _key(tl.load(x_row + offs, mask=m, other=0.0))
            gt = m & (key > t)
            eq = m & (key == t)
            v = tl.cumsum(gt.to(tl.int32) + (eq.to(tl.int32) << 16), 0)
            n_b = tl.sum(gt.to(tl.int32), 0)
            if n_b > 0:
                base = tl.atomic_add(rr_row + 4 * 256, n_b, sem="relaxed")
                tl.store(o_row + base + (v & 65535) - 1, offs, mask=gt)
            e = taken + (v >> 16)
            tl.store(o_row + n_gt + e - 1, offs, mask=eq & (e <= need))
            taken += tl.sum(eq.to(tl.int32), 0)


@triton.jit(do_not_specialize=NO_SPEC + ["P"])
def _r_place(x_ptr, stride_x, len_ptr, info_ptr, rl_ptr, rr_ptr, hist_ptr, out_ptr, stride_o, N, K, C, P,
             RR: tl.constexpr, CB: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr, RLIST: tl.constexpr):
    """The refine's placement, over the same grid as _r_hist."""
    if PDL:
        tl.extra.cuda.gdc_wait()
    if RLIST:
        for i in range(tl.program_id(0), tl.load(rl_ptr), P):
            _r_place_row(x_ptr, stride_x, len_ptr, info_ptr, rr_ptr, hist_ptr, out_ptr, stride_o,
                         tl.load(rl_ptr + 1 + i), tl.program_id(1), N, K, C, RR, CB, BLOCK)
    else:
        _r_place_row(x_ptr, stride_x, len_ptr, info_ptr, rr_ptr, hist_ptr, out_ptr, stride_o, tl.program_id(0),
                     tl.program_id(1), N, K, C, RR, CB, BLOCK)


@triton.jit
def _short_rows(x_ptr, stride_x, len_ptr, out_ptr, stride_o, N, K, NP: tl.constexpr, KP: tl.constexpr):
    """SHORT: a call whose rows are at most SHORT wide, in one launch of one program per row. The row's keys stay
    in registers: up to four 8-bit digit levels from the top, each histogrammed over the keys that match the
    digits chosen so far, narrow the bucket of the k-th key; they stop once the bucket holds exactly the keys still
    to take (all of it is taken, so the k-th key need not be fixed: on distinct values mostly after two levels, on
    heavy ties never). Then the keys above the bucket's largest key and the first of the bucket's keys in index
    order go out through one prefix sum, and -1 pads the rest. Its cost is bounded by SHORT, not the row: the chain
    of nine launches is what a short call paid for (docs/kernels.md, "Short calls"). The levels are a loop, not
    four unrolled copies: the unrolled code ran 9 us slower with a cold instruction cache (docs/kernels.md,
    "Where the one launch spends its time")."""
    row = tl.program_id(0).to(tl.int64)
    L, k_eff = _row_len(len_ptr, row, N, K)
    offs = tl.arange(0, NP)
    m = offs < L
    key = _key(tl.load(x_ptr + row * stride_x + offs, mask=m, other=0.0))
    live = m
    k_rem = k_eff
    n_live = L
    shift = 24
    while (shift >= 0) & (n_live > k_rem):   # n_live == k_rem: every key left is taken
        d = ((key >> shift.to(tl.uint32)) & 255).to(tl.int32)
        dsel, k_rem, n_live = _pick_n(tl.histogram(d, 256, mask=live), k_rem, 256)
        live = live & (d == dsel)
        shift -= 8
    t = tl.max(tl.where(live, key, 0), 0)      # the bucket's largest key: every key above it is taken
    rank = tl.cumsum(live.to(tl.int32), 0) - 1
    sel = (m & (key > t)) | (live & (rank < k_rem))
    o_row = out_ptr + row * stride_o
    tl.store(o_row + tl.cumsum(sel.to(tl.int32), 0) - 1, offs, mask=sel)
    po = tl.arange(0, KP)
    tl.store(o_row + po, -1, mask=(po >= k_eff) & (po < K))


def _topk(logits, lengths, k, out, BLOCK, TARGET_CTAS, MAX_C, num_warps, SMALL, SEL_WARPS, NS, G,
              ALPHA_X2, BETA, ATOMIC=0, MIN_C=16, SMALLR=512, SPAN_BITS=9, SMALLTA=1024, HREG=0,
              KD_WARPS=4, PF=1, SCAN_MAX_ROWS=8, KA_WARPS=8, PDL=1, WARP=1, KD_EARLY=1, RBLOCK=1024, TIE=512, KTH=0,
              RLIST=0, RGRID=256, VLIN=0, TIE_WHOLE=512, RMIN=0, RROW=0, KDIG=0, KDIG_ROWS=0, KC_MID=0, TIE2=0, TIE2_MAX_N=0,
              TIE2_ROWS=0, SHORT=0, KC_SORT=0):
    M, N = logits.shape
    dev = logits.device
    if N <= SHORT:      # every row fits one program's registers: one launch (docs/kernels.md, "Short calls")
        NP = triton.next_power_of_2(max(N, 16))
        _short_rows[(M,)](logits, logits.stride(0), lengths, out, out.stride(0), N, k, NP=NP,
                          KP=triton.next_power_of_2(k),
                          num_warps=max(8, min(NP // 512, 16)))   # <= 16 keys a thread
        return out
    # KDIG costs KA 1-3% of a call at 1-4 rows, where a call's one row rarely misses; it pays at many rows, where
    # any row's miss sends the call to the refine (docs/kernels.md, "KDIG by rows")
    KDIG = KDIG if M >= KDIG_ROWS else 0
    # TIE2 fixes the ties family's tail at 4-32 rows of 32K but costs 1-2 us in every call; only calls of rows at
    # most TIE2_MAX_N wide and at least TIE2_ROWS many pay it (docs/kernels.md, "TIE2_MAX_N and TIE2_ROWS")
    TIE2 = TIE2 if (TIE2_MAX_N == 0 or N <= TIE2_MAX_N) and M >= TIE2_ROWS else 0
    assert BLOCK <= 32768 and N < 2 ** 31 and NS * G <= SMALL and MAX_C in (1, 2, 4, 8, 16, 32, 64)
    assert SMALL & (SMALL - 1) == 0
    assert 0 <= KDIG < 128 and not (HREG and KDIG)     # HREG's in-scan histogram takes the plain shift only
    assert not (HREG and TIE2)                         # TIE2's counts come from KB's re-read, which HREG skips
    # the sample grows with the row: r's slack of BETA samples stands for about BETA L / S values above the k-th,
    # and S >= 4 BETA L / (3 k) keeps them at most half of the 1.5 k expected candidates, so that the regions of
    # RC slots do not overflow (NS = 64 at 256K overflowed 128-slot regions: ~1.1 ms, KC's one-program fallback)
    NS = min(max(NS, triton.next_power_of_2(triton.cdiv(4 * BETA * N, 3 * max(k, 1) * G))), SMALL // G, 256)
    nblk = triton.cdiv(max(N, 1), BLOCK)
    want = max(MIN_C, triton.next_power_of_2(triton.cdiv(TARGET_CTAS, M)))
    C = min(want, MAX_C, 1 << (nblk.bit_length() - 1))       # a power of two <= MAX_C (64) and <= nblk
    # a region's slots: >= SMALL / C + 64 while C <= 64 (a row read whole), at least RMIN and RROW / C: a region
    # that overflows sends its row, and so its call, to the refine (+30-60 us). A sampled row has ~4800
    # candidates (up to ~8000): 128-256 slots overflowed on ~0.1-0.6% of rows at C = 64-32, 512 on ~1 row in
    # 2500 at C = 16 (docs/kernels.md, "no refine at 64-128 rows")
    RC = max(2 * SMALL // C, RMIN, RROW // C)
    CB = 64                                                   # programs per row, at most
    thr = torch.empty((M, 4), dtype=torch.int32, device=dev)     # threshold key, digit shift, tie mark
    cnt = torch.empty((M, C), dtype=torch.int32, device=dev)      # zeroed by KA, written by KB: no memset
    eqc = torch.empty((M, C), dtype=torch.int32, device=dev)      # KB: copies of thr per program on a tie row
    t2 = torch.empty(M, dtype=torch.int32, device=dev)            # TIE2: KA's q2, the smallest key above thr
    g2 = torch.empty((M, C, 2), dtype=torch.int32, device=dev)    # TIE2: KB's candidates above and equal to q2
    # slots KD's early load reads per region: 2048 where rows read whole fill regions of 2 SMALL / C > 512 slots
    # (one wide load beat 512-slot chunks there), else 512; a program with more candidates places them in chunks
    RT = 512 if 2 * SMALL // C <= 512 else 2048
    # KD's early load reads RT slots of every region unmasked: past the last region of cand[1] lie
    # RT - RC allocated slots, so that read never leaves the buffer (it read up to RT - RC slots past its end)
    cand = torch.empty(2 * M * C * RC + max(0, RT - RC), dtype=torch.int32, device=dev)[:2 * M * C * RC]
    cand = cand.view(2, M, C, RC)
    hist = torch.empty((M, C, 256), dtype=torch.int32, device=dev)   # KB's per-program suffix counts
    rhist = torch.empty((M, 256), dtype=torch.int32, device=dev)     # the row's digit histogram (KA zeroes it)
    rscr = torch.empty((M, 2, SMALLR), dtype=torch.int32, device=dev)
    scra = torch.empty((M, SMALLTA), dtype=torch.int32, device=dev)
    info = torch.empty((M, 4), dtype=torch.int32, device=dev)       # KD's decision per row, for KC
    rlist = torch.empty(M + 1, dtype=torch.int32, device=dev)       # the refine's rows: count (KA zeroes it), rows
    RR = RS.value + 6 * CB    # the refine's row scratch: KD zeroes its first 1025; then levels 0-2's records
    rr = torch.empty((M, RR), dtype=torch.int32, device=dev)
    sx = logits.stride(0)
    # programmatic dependent launch (Hopper): each kernel's programs start while the one before finishes and
    # wait (griddepcontrol.wait) before reading its output; not in Triton's CPU interpreter
    pdl = bool(PDL) and logits.is_cuda and hasattr(tl.extra.cuda, "gdc_wait")
    lp = {"launch_pdl": True} if pdl else {}
    # KB's scan is memory-bound: it needs every program an SM can hold in flight. VLIN's value digits took KB
    # from 64 registers a thread to 70-72 (7 programs of 128 threads per SM, not 8) and the scan 20-25% longer
    # on rows that never use them; capped at 64 it spills nothing (docs/kernels.md, "Value-linear digits")
    kb_regs = {"maxnreg": 64} if VLIN and logits.is_cuda else {}
    # warp-ballot slots in PTX (a GPU only; the interpreter runs the Triton form)
    warp = bool(WARP) and logits.is_cuda
    assert not (warp and HREG)
    assert not (VLIN and HREG)       # HREG's in-scan histogram takes key-linear digits only
    if warp:
        ATOMIC = 1      # not used by the warp slots: one KB compile for every M
    elif M <= SCAN_MAX_ROWS:
        ATOMIC = 0      # few rows (programs of one or two blocks): a block scan beats slots from atomics
    _ka_sample[(M,)](logits, sx, lengths, thr, t2, cnt, rhist, scra, rlist, N, k, SMALL, C, NS=NS, G=G, ALPHA_X2=ALPHA_X2,
                     BETA=BETA, CB=CB, SMALLTA=SMALLTA, SPAN_BITS=SPAN_BITS, PDL=pdl, FULL=SMALL, TIE=TIE, KTH=KTH,
                     VLIN=VLIN, TIE_WHOLE=TIE_WHOLE, KDIG=KDIG, TIE2=TIE2, num_warps=KA_WARPS)
    _kb_filter[(M, C)](logits, sx, lengths, thr, t2, cnt, eqc, g2, cand[0], cand[1], hist, rhist, N, k, C, RC, BLOCK=BLOCK,
                       ATOMIC=ATOMIC, HB=256, HREG=HREG, PF=PF, PDL=pdl, WARP=warp, VLIN=VLIN, TIE2=TIE2,
                       num_warps=num_warps, **lp, **kb_regs)
    _kd_place[(M, C)](logits, sx, lengths, thr, t2, cnt, eqc, g2, cand[0], cand[1], hist, rhist, rscr, info, rlist, rr,
                      out, out.stride(0), N, k, C, RC, RR=RR, CB=CB, RT=RT, SMALLR=SMALLR, PDL=pdl, EARLY=KD_EARLY,
                      TB=1024, VLIN=VLIN, TIE2=TIE2, num_warps=KD_WARPS, **lp)
    _kc_select[(M,)](lengths, rscr, info, out, out.stride(0), N, k, KBLOCK=1024, SMALLR=SMALLR, MID=KC_MID, PDL=pdl,
                     SORT=KC_SORT, num_warps=SEL_WARPS, **lp)
    # the refine: launched every call (no host sync decides it). Grid (M, C): every other row's programs return
    # at once; RLIST: grid (P, C), the programs loop over the rows KD listed (none: each returns after one load)
    P = min(M, max(1, RGRID // C)) if RLIST else M
    for level in range(4):
        _r_hist[(P, C)](logits, sx, lengths, info, rlist, rr, hist, N, k, C, P, RR=RR, LEVEL=level, CB=CB,
                        BLOCK=RBLOCK, PDL=pdl, RLIST=RLIST, num_warps=num_warps, **lp)
    _r_place[(P, C)](logits, sx, lengths, info, rlist, rr, hist, out, out.stride(0), N, k, C, P, RR=RR, CB=CB,
                     BLOCK=RBLOCK, PDL=pdl, RLIST=RLIST, num_warps=num_warps, **lp)
    return out


def forward(logits, lengths, k):
    assert logits.dim() == 2 and logits.dtype == torch.float32
    M = logits.shape[0]
    logits = logits.contiguous()
    lengths = lengths.to(torch.int32).contiguous()
    out = torch.empty((M, k), dtype=torch.int32, device=logits.device)
    if M == 0 or k == 0:
        return out
    return _topk(logits, lengths, k, out, **PARAMS)
