"""CPU checks (Triton interpreter, tiny shapes) of every path of the live top-k kernel, dsa_topk/best.py (folded
into both indexers' best.py): key-linear digits, and value-linear ones where VLIN is on. Small samples (NS x G = 256, SMALL = 512) make these tiny rows take the sampled path; forced-fallback
parameters (r = 1: the threshold is the largest sample; r far too large: the candidate regions overflow) run
the refine, over a grid of every row (or, with RLIST, the programs looping over the rows KD listed). Adds to
test_candidates_cpu.py's cases ReLU zeros (k-th value 0.0, a tie bucket of ~N zeros), short rows read whole,
and rows whose k-th value lies near zero (indexer logits).
"""
import pytest
import torch
from test_candidates_cpu import _contract, _load, _topk_cases, check_topk

# RMIN and RROW 0: regions of 2 SMALL / C slots (64 here), so that the forced-fallback configs overflow them;
# SHORT 0: these rows are at most 5000 wide, and SHORT would take every call of 4096 or fewer in one launch
V8 = {"BLOCK": 256, "TARGET_CTAS": 8, "SMALL": 512, "NS": 32, "G": 8, "RBLOCK": 256, "RMIN": 0, "RROW": 0,
      "SHORT": 0}
KEY = "dsa_topk/best.py"
PATHS = [(KEY, dict(V8, VLIN=0), "key"), (KEY, dict(V8, ATOMIC=0, SPAN_BITS=8, KTH=0), "key-scan-span8-max"),
         (KEY, dict(V8, ALPHA_X2=0, BETA=1, RLIST=1, RGRID=16), "key-fallback-low-rlist"),
         (KEY, dict(V8, ALPHA_X2=40, BETA=200, ATOMIC=1), "key-fallback-overflow"),
         (KEY, dict(V8, SCAN_MAX_ROWS=0, PF=0, KD_EARLY=0), "key-atomic-noprefetch"),
         (KEY, dict(V8, ALPHA_X2=0, BETA=1, SCAN_MAX_ROWS=0, PF=1, RLIST=0), "key-fallback-low-pf1-grid"),
         (KEY, dict(V8, SMALLR=4, SMALLTA=8, SPAN_BITS=8), "key-small-tiles-span8"),
         (KEY, dict(V8, BLOCK=1024, HREG=1, VLIN=0, TIE2=0), "key-one-block-hreg"),
         (KEY, dict(V8, KDIG=80, KC_MID=128, RROW=16384, TIE2=1, TIE2_MAX_N=0, TIE2_ROWS=0), "key-options-on"),
         (KEY, dict(V8, SHORT=8192), "key-short-rows")]


def _relu_cases():
    g = torch.Generator().manual_seed(3)
    cases = []
    for (M, N, k) in [(3, 3000, 64), (2, 2000, 700)]:
        x = torch.relu(torch.randn(M, N, generator=g) - 2.5)      # ~0.6% positive: k-th value is 0.0
        x[-1] = torch.relu(torch.randn(N, generator=g)).round(decimals=1)
        lengths = torch.full((M,), N, dtype=torch.int32)
        lengths[0] = N - 7
        cases.append((x, lengths, k))
    return cases


@pytest.mark.parametrize("rel,params,name", PATHS, ids=[p[2] for p in PATHS])
def test_topk_paths_exact(rel, params, name):
    m = _load(rel, params)
    _contract(m)
    spy = _AllocationSpy()
    m.torch = spy
    g = torch.Generator().manual_seed(5)
    x = torch.randn(3, 3000, generator=g).round(decimals=2)      # ties at the k-th value (path A tie-break)
    # short rows (k < L <= SMALL = 512: read whole by KA): random, tie buckets, ReLU zeros, equal
    s = torch.randn(4, 500, generator=g)
    s[1] = torch.randint(0, 5, (500,), generator=g).float()
    s[2] = torch.relu(s[2] - 1.0)
    s[3] = 1.5
    # the k-th value near zero under a few large values (indexer logits: keys are far from linear there)
    z = torch.randn(2, 3000, generator=g) * 1e-3
    z[:, ::97] += 5.0
    ties = [(x, torch.tensor([3000, 2500, 700], dtype=torch.int32), 300),
            (s, torch.tensor([500, 300, 450, 200], dtype=torch.int32), 100)]
    cases = ties + _topk_cases() + _relu_cases() + [(z, torch.tensor([3000, 2000], dtype=torch.int32), 300)]
    for i, (x, lengths, k) in enumerate(cases):
        xc = x.clone()
        spy.made.clear()
        out = m.forward(x, lengths, k)
        assert torch.equal(x, xc)
        check_topk(out, x, lengths, k)
        if i == 0 and "fallback" in name:  # the forced fallbacks do take the refine (KD's mode 0) on these rows
            info = [t for t in spy.made if t.dim() == 2 and t.shape == (x.shape[0], 4)][-1]
            assert info[:2, 0].tolist() == [0, 0], info.tolist()
        if "short" in name and x.shape[1] <= params["SHORT"]:  # one launch: no scratch, only forward's output
            assert [tuple(t.shape) for t in spy.made] == [tuple(out.shape)], [t.shape for t in spy.made]
        if i < len(ties):  # run twice where ties at the k-th value make a racy tie-break visible
            assert torch.equal(out.sort(1).values, m.forward(x, lengths, k).sort(1).values)


class _AllocationSpy:
    """Stands in for the candidate module's `torch`: records what `torch.empty` hands out (the refine's row
    scratch among it), and is torch for everything else."""

    def __init__(self):
        self.made = []

    def __getattr__(self, name):
        return getattr(torch, name)

    def empty(self, *args, **kwargs):
        t = torch.empty(*args, **kwargs)
        self.made.append(t)
        return t


def _run_key(params, x, lengths, k, exact=True):
    """The key top-k with `params` over x, checked exact (unless `exact` is False: the caller checks); returns the
    module, the output, KA's threshold buffer and KD's per-row decisions (both (M, 4): the first and the last such
    buffer the call allocates)."""
    m = _load(KEY, params)
    spy = _AllocationSpy()
    m.torch = spy
    out = m.forward(x, lengths, k)
    if exact:
        check_topk(out, x, lengths, k)
    rows4 = [t for t in spy.made if t.dim() == 2 and t.shape == (x.shape[0], 4)]
    return m, out, rows4[0], rows4[-1]


def test_a_tie_bucket_at_the_kth_key_ends_the_refine_early():
    """Every row forced into the refine (regions overflow). A row whose k-th key is its largest, with more copies
    than k (the ties family), is fixed by level 0 (levels 1-3 count nothing); ReLU zeros under fewer than k
    positives by level 1 (levels 2-3 count nothing); one octave of distinct values needs all four levels. The
    answers stay exact, and the level histograms show which levels ran."""
    m = _load(KEY, dict(V8, ALPHA_X2=40, BETA=200, ATOMIC=1, TIE=0))     # KA's tie mark off: the refine runs
    spy = _AllocationSpy()
    m.torch = spy
    g = torch.Generator().manual_seed(11)
    N, k = 3000, 64
    x = torch.stack([torch.randint(0, 5, (N,), generator=g).float(),
                     torch.relu(torch.randn(N, generator=g) - 2.9),
                     16.0 + 16.0 * torch.rand(N, generator=g)])
    assert 0 < int((x[1] > 0).sum()) < k
    lengths = torch.full((3,), N, dtype=torch.int32)
    out = m.forward(x, lengths, k)
    check_topk(out, x, lengths, k)
    rr = next(t for t in spy.made if t.dim() == 2 and t.shape == (3, m.RS.value + 6 * 64))
    levels = rr[:, :1024].reshape(3, 4, 256).sum(2)           # keys counted per level, per row
    assert levels[0, 0] == N and levels[0, 1:].tolist() == [0, 0, 0]
    assert levels[1, 0] == N and levels[1, 1] > k and levels[1, 2:].tolist() == [0, 0]
    assert (levels[2] > 0).all()


def test_a_tie_at_the_threshold_is_taken_without_the_refine():
    """KA marks a row whose sample puts a crowded key at the threshold (mode 3): KB counts that key's copies and
    KD takes what the row needs of them, a share from each program's part, so the row never reaches the refine.
    Rows: 5 distinct values (the k-th key the largest, with ~600 copies), ReLU zeros under fewer than k
    positives, a short row read whole of 3 values; and a crowded key below the k-th (marked, but more than k keys above it: the common modes).
    The answers are exact, and the tie's copies come from every program's part (_tie_quota), the same set on
    every call."""
    m = _load(KEY, dict(V8, TIE=64, TIE_WHOLE=64))
    spy = _AllocationSpy()
    m.torch = spy
    g = torch.Generator().manual_seed(13)
    N, k = 3000, 64
    below = torch.full((N,), -1.0)
    below[:100] = 0.5 + 0.5 * torch.rand(100, generator=g)     # 100 distinct keys above 1500 copies of 0.5
    below[100:1600] = 0.5
    below = below[torch.randperm(N, generator=g)]
    short = torch.full((N,), -5.0)
    short[:400] = torch.randint(0, 3, (400,), generator=g).float()
    x = torch.stack([torch.randint(0, 5, (N,), generator=g).float(), torch.relu(torch.randn(N, generator=g) - 2.9),
                     short, below])
    lengths = torch.tensor([N, N - 11, 400, N], dtype=torch.int32)
    out = m.forward(x, lengths, k)
    check_topk(out, x, lengths, k)
    info = [t for t in spy.made if t.dim() == 2 and t.shape == (4, 4)][-1]      # KD's decision per row
    assert info[:3, 0].tolist() == [3, 3, 3] and info[3, 0] in (1, 2)
    for r in range(3):        # the tie's copies are taken from every program's part, not from the first ones
        row = x[r, :lengths[r]]
        taken = out[r][row[out[r]] == row[out[r]].min()]
        assert int(taken.max()) > int((row == row[out[r]].min()).nonzero()[len(taken) - 1])
    assert torch.equal(out, m.forward(x, lengths, k))



def test_regions_of_rrow_over_c_slots_keep_a_row_whose_candidates_crowd_one_part_off_the_refine():
    """A row whose largest values crowd one program's part: with regions of 2 SMALL / C = 64 slots that program's
    region overflows and the row takes the refine (mode 0), as about 0.1-0.6% of sampled rows did on a GPU with
    128 or 256 slots; with RROW = 8192 (512 slots at C = 16) it fits and the row takes mode 2. Exact both ways; the other row, its
    candidates spread, takes mode 2 in both."""
    g = torch.Generator().manual_seed(19)
    M, N, k = 2, 6000, 100
    x = torch.randn(M, N, generator=g)
    x[0, :300] += 4.0                  # the first part (6000 / 16 = 375 values) holds nearly every candidate
    lengths = torch.full((M,), N, dtype=torch.int32)
    _, _, _, small = _run_key(dict(V8, RROW=0), x, lengths, k)
    _, _, _, large = _run_key(dict(V8, RROW=8192), x, lengths, k)
    assert small[:, 0].tolist() == [0, 2]
    assert large[:, 0].tolist() == [2, 2]


def test_a_region_of_more_than_512_candidates_is_placed_in_chunks():
    """A row whose 700 largest values lie in one program's part (12000 / 16 = 750 values). Regions of 512 slots
    overflow there and the row takes the refine; with 1024 (RROW = 16384 at C = 16) it fits, and KD, whose early load is 512
    slots, places the rest in a second chunk: mode 2 (row 0: digits above the k-th's to the output, its
    members to KC) and mode 3 (row 1: the 700 above a tie of 1.0, then the copies of 1.0 that k needs). Exact
    every way."""
    g = torch.Generator().manual_seed(23)
    M, N = 2, 12000
    x = torch.randn(M, N, generator=g)
    x[0, :700] += 6.0
    x[1] = 1.0
    x[1, :700] = 10.0 + torch.rand(700, generator=g)
    lengths = torch.full((M,), N, dtype=torch.int32)
    k = 1000
    _, _, _, small = _run_key(dict(V8, RROW=8192), x, lengths, k)
    _, _, thr, large = _run_key(dict(V8, RROW=16384), x, lengths, k)
    assert thr[:, 2].tolist() == [0, 1]                   # row 1 marked a tie at 1.0
    assert small[:, 0].tolist() == [0, 0] and large[:, 0].tolist() == [2, 3]


def test_a_tie_bucket_above_the_marked_threshold_holding_the_kth_takes_mode_4():
    """The ties family's straddle: the sample marks a tie at the second bucket (1.0, half the row) because the top
    bucket (2.0, k + 50 copies) has fewer samples than r, so every candidate is a copy of 2.0 (row 0; row 1 also
    has 10 values of 3.0 above it) and the k-th's digit holds more than SMALLR of them: the refine, without TIE2.
    With TIE2, KD takes the candidates above q2 = 2.0 and then k - 10 or k copies of 2.0 in index order (mode 4).
    Exact both ways; row 2, whose top bucket holds fewer than k, takes mode 3 both ways. TIE2_MAX_N below the
    row's width, or TIE2_ROWS above the call's rows, turns TIE2 off for the call."""
    g = torch.Generator().manual_seed(31)
    M, N, k = 3, 12000, 600
    x = torch.randn(M, N, generator=g) * 0.1 - 3.0
    for r, top in enumerate((k + 50, k + 50, k - 50)):
        perm = torch.randperm(N, generator=g)
        x[r, perm[:6000]] = 1.0
        x[r, perm[6000:6000 + top]] = 2.0
    x[1, torch.randperm(N, generator=g)[:10]] = 3.0
    lengths = torch.full((M,), N, dtype=torch.int32)
    _, _, thr, off = _run_key(dict(V8, TIE2=0), x, lengths, k)
    _, _, _, on = _run_key(dict(V8, TIE2=1, TIE2_MAX_N=0, TIE2_ROWS=0), x, lengths, k)
    _, _, _, on_rows = _run_key(dict(V8, TIE2=1, TIE2_MAX_N=N, TIE2_ROWS=M), x, lengths, k)
    _, _, _, wide = _run_key(dict(V8, TIE2=1, TIE2_MAX_N=N - 1, TIE2_ROWS=0), x, lengths, k)   # only up to N - 1 wide
    _, _, _, few = _run_key(dict(V8, TIE2=1, TIE2_MAX_N=0, TIE2_ROWS=M + 1), x, lengths, k)    # only from M + 1 rows
    assert thr[:, 2].tolist() == [1, 1, 1]                # marked at 1.0
    assert off[:, 0].tolist() == [0, 0, 3] and on[:, 0].tolist() == [4, 4, 3] and on_rows[:, 0].tolist() == [4, 4, 3]
    assert wide[:, 0].tolist() == [0, 0, 3] and few[:, 0].tolist() == [0, 0, 3]


def test_the_kth_digit_from_eighths_of_an_octave_lands_near_kdig():
    """With KDIG, KA stores a shift and a factor f < 2^16 that put the sampled k-th key's distance above thr
    (known to an eighth of an octave) on digits KDIG..1.125 KDIG instead of anywhere in 64-127. On normal rows of
    6000 (a sample of 256 values) the true k-th key's digit, computed here from KA's word as _dig does, stays
    within a factor 2 of KDIG, and every row takes mode 2. With KDIG = 0, or a call of fewer rows than KDIG_ROWS,
    the word holds the plain shift (f = 2^16)."""
    g = torch.Generator().manual_seed(29)
    M, N, k = 3, 6000, 300
    x = torch.randn(M, N, generator=g)
    lengths = torch.full((M,), N, dtype=torch.int32)
    keys = x.view(torch.int32).to(torch.int64)
    keys = torch.where(keys < 0, ~keys & 0xFFFFFFFF, keys | 0x80000000)
    kth = keys.sort(1, descending=True).values[:, k - 1]
    for kdig, rows in ((0, 0), (40, 0), (80, 0), (80, M + 1)):
        _, _, thr, info = _run_key(dict(V8, KDIG=kdig, KDIG_ROWS=rows), x, lengths, k)
        word = thr[:, 1].to(torch.int64)
        sh, f = word & 255, word >> 8
        t = thr[:, 0].to(torch.int64) & 0xFFFFFFFF
        digit = (((kth - t) >> sh).clamp(max=65535) * f) >> 16
        if kdig == 0 or rows > M:
            assert f.tolist() == [65536] * M
        else:
            assert (f < 65536).all() and (f >= (kdig << 16) // 240).all()
            assert (digit >= kdig // 2).all() and (digit <= 2 * kdig).all(), digit.tolist()
        assert info[:, 0].tolist() == [2] * M


def test_relu_zeros_at_the_threshold_with_more_than_k_positives_take_mode_2_with_vlin_2():
    """The indexers' relu family at 32K: ~10% positives (more than k), the rest exact zeros. The sample's
    threshold with its slack lands among the zeros, KA marks a tie at +0.0, and n_gt > k_eff, so the row needs
    mode 2; key-linear digits from zero put an octave of positives in a few digits, the k-th digit holds more
    than SMALLR, and the row takes the refine. VLIN 2 gives such a row value-linear digits scaled by its sampled
    k-th value's exponent: mode 2, exact."""
    g = torch.Generator().manual_seed(31)
    M, N, k = 3, 8000, 640
    live = torch.rand(M, N, generator=g) < 0.1
    x = torch.where(live, torch.randn(M, N, generator=g).abs() * 10, torch.zeros(M, N))
    lengths = torch.full((M,), N, dtype=torch.int32)
    assert ((x > 0).sum(1) > k).all()
    for vlin, mode in ((1, 0), (2, 2)):
        _, _, thr, info = _run_key(dict(V8, VLIN=vlin), x, lengths, k)
        assert thr[:, 2].tolist() == [1] * M and (thr[:, 0] == -2 ** 31).all()   # marked at +0.0's key
        assert info[:, 0].tolist() == [mode] * M


def test_the_digit_scale_from_the_kth_keeps_a_uniform_row_off_the_refine():
    """Uniform rows (near_bf16: the candidates spread evenly up to the largest sample). With the digit shift taken
    from the largest sample (KTH = 0) the k-th candidate lands in the clamped top digit and such rows take the
    refine; taken from the sampled key ranked where the k-th is expected (KTH = 2) every row takes mode 2. A row
    whose threshold is negative keeps the shift from the largest sample (keys are linear in the value on one
    side of zero only). Exact in every case."""
    g = torch.Generator().manual_seed(17)
    M, N, k = 5, 6000, 100
    x = (1.0 + torch.rand(M, N, generator=g) * 2.0 ** -8) * 4.0
    x[-1] = torch.randn(N, generator=g) - 5.0        # every key negative: the threshold too
    lengths = torch.full((M,), N, dtype=torch.int32)
    # RLIST: the refine takes only the listed rows
    _, _, thr0, info0 = _run_key(dict(V8, KTH=0, RLIST=1, RGRID=32), x, lengths, k)
    _, _, thr2, info2 = _run_key(dict(V8, KTH=2, RLIST=1, RGRID=32), x, lengths, k)
    modes0, modes2 = info0[:, 0].tolist(), info2[:, 0].tolist()
    assert modes2[:M - 1] == [2] * (M - 1) and 0 in modes0[:M - 1]
    assert thr2[-1, 1] == thr0[-1, 1] and modes2[-1] == modes0[-1]


def test_value_linear_digits_where_the_threshold_is_negative_keep_the_row_off_the_refine():
    """Normal rows with k near half the row: thr < 0 lies below positive keys, where keys are not linear in the
    value, and with key-linear digits the k-th key's digit is crowded, so every such row takes the refine
    (seen on a GPU at 24 x 4560, docs/kernels.md). With VLIN = 1 KA gives those rows value-linear digits and
    they take mode 2; a row whose keys are all positive keeps key-linear digits (its scale slot stays 0).
    Exact in every case."""
    g = torch.Generator().manual_seed(19)
    M, N, k = 4, 700, 300
    x = torch.randn(M, N, generator=g)
    x[-1] = x[-1].abs() + 1.0                    # every key positive: key-linear digits
    lengths = torch.full((M,), N, dtype=torch.int32)
    _, _, _, info0 = _run_key(dict(V8, VLIN=0), x, lengths, k)
    _, _, thr1, info1 = _run_key(dict(V8, VLIN=1), x, lengths, k)
    modes0, modes1 = info0[:, 0].tolist(), info1[:, 0].tolist()
    scale = thr1[:, 3].view(torch.float32)
    assert modes0[:M - 1] == [0] * (M - 1) and modes1[:M - 1] == [2] * (M - 1), (modes0, modes1)
    assert (scale[:M - 1] > 0).all() and scale[-1] == 0 and modes1[-1] == modes0[-1] != 0



def test_a_nan_or_an_infinity_on_a_value_digit_row_takes_the_top_digit():
    """torch.topk ranks NaN above +inf above every finite value. On a row with value-linear digits the digit of
    a key is computed from its value, where NaN - value(thr) is NaN: it must still land in the top digit, as its
    key does with key-linear digits, and be in the output."""
    g = torch.Generator().manual_seed(29)
    M, N, k = 2, 700, 300
    x = torch.randn(M, N, generator=g)
    x[0, 123], x[1, 77] = float("nan"), float("inf")
    lengths = torch.full((M,), N, dtype=torch.int32)
    # check_topk's min over a row with a NaN is NaN: this test compares index sets with torch.topk's instead
    _, out, thr, _ = _run_key(dict(V8, VLIN=1), x, lengths, k, exact=False)
    assert (thr[:, 3].view(torch.float32) > 0).all()          # both rows took value-linear digits
    ref = torch.topk(x, k, 1).indices
    assert 123 in out[0].tolist() and 77 in out[1].tolist()
    for r in range(M):
        assert sorted(out[r].tolist()) == sorted(ref[r].tolist())


def test_a_row_read_whole_takes_its_tie_by_its_own_mark():
    """Rows read whole (L <= SMALL) of 16 distinct values, k half the row: the bucket at the k-th key (~31 copies
    here) stays under the sampled rows' mark and KC ranks it (mode 2); with the mark for rows read whole below
    the bucket (TIE_WHOLE = 16) KA marks the row and KD places the copies (mode 3). Exact both ways, and the
    same set on two calls."""
    g = torch.Generator().manual_seed(23)
    M, N, k = 3, 500, 250
    x = (torch.randint(-8, 8, (M, N), generator=g).float() + 0.5) / 4
    lengths = torch.full((M,), N, dtype=torch.int32)
    modes = {}
    for mark in (512, 16):
        m, out, _, info = _run_key(dict(V8, TIE_WHOLE=mark), x, lengths, k)
        assert torch.equal(out.sort(1).values, m.forward(x, lengths, k).sort(1).values)
        modes[mark] = info[:, 0].tolist()
    assert modes[512] == [2] * M and modes[16] == [3] * M, modes


def test_a_short_row_stops_its_digit_levels_once_the_bucket_is_taken_whole(monkeypatch):
    """SHORT: a one-launch row stops its digit levels when the chosen digits' bucket holds exactly the keys still
    to take. Distinct values (randn) stop after two levels, a row shorter than k needs none, heavy ties and equal
    rows run all four; every answer stays exact. The interpreter's histogram calls count the levels (a form
    without the stop would count four on every row)."""
    from triton.runtime import interpreter  # local: only the interpreter's builder is patched, and only here
    levels = []
    histogram = interpreter.InterpreterBuilder.create_histogram
    monkeypatch.setattr(interpreter.InterpreterBuilder, "create_histogram",
                        lambda self, *a, **kw: levels.append(1) or histogram(self, *a, **kw))
    g = torch.Generator().manual_seed(1)
    rows = {"randn": (torch.randn(1, 4096, generator=g), 2), "equal": (torch.full((1, 4096), 1.5), 4),
            "ties16": (torch.randint(0, 16, (1, 4096), generator=g).float(), 4),
            "shorter than k": (torch.randn(1, 1500, generator=g), 0)}
    m = _load(KEY, dict(V8, SHORT=8192))
    for name, (x, want) in rows.items():
        lengths = torch.full((1,), x.shape[1], dtype=torch.int32)
        levels.clear()
        check_topk(m.forward(x, lengths, 2048), x, lengths, 2048)
        assert len(levels) == want, (name, len(levels))


def test_a_tie_bucket_ranked_by_one_sort_takes_the_same_copies_as_the_pairwise_ranks():
    """KC_SORT: KC orders mode 2's members (the k-th digit's keys, here one value's ~460 copies on two rows of 16
    values, the held-out 2 x 7350 ties case) by one sort instead of pairwise ranks. It must take the same copies
    (key descending, then index ascending) as the pairwise form; the rows are read back as mode 2 with more than
    64 members, so the sort is what ran."""
    g = torch.Generator().manual_seed(7)
    x = torch.randint(0, 16, (2, 7350), generator=g).float()
    lengths = torch.full((2,), 7350, dtype=torch.int32)
    outs = []
    for sort in (0, 1):
        _, out, _, info = _run_key({"KC_SORT": sort}, x, lengths, 2048)
        assert info[:, 0].tolist() == [2, 2] and min(info[:, 2].tolist()) > 64, info.tolist()
        outs.append(out.sort(1).values)
    assert torch.equal(outs[0], outs[1])
