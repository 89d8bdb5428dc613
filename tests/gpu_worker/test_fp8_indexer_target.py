"""dsa_indexer_topk_fp8 on a CPU: the paged FP8 layout, the exact reference, and the check's band (what an
accumulation order may change passes, a real error fails). docs/kernels.md, "The FP8 indexer"."""

import pytest
import torch

from gpu_worker.targets import dsa_indexer_topk_fp8 as t
from gpu_worker.targets import get_target

SHAPE = t._shape(4, 5000, "normal", "ragged")


@pytest.fixture(scope="module")
def case():
    inputs = t.make_inputs(SHAPE, 3, "cpu")
    return inputs, t.reference(inputs)


def _plain_reference(inputs):
    """The contract read literally (FlashInfer-Bench's reference): dequantise the whole cache to value x scale,
    then per row gather its pages, q K^T, relu, weights, head sum; f64 here."""
    q, cache, w, lens, bt = inputs
    raw = cache.view(torch.uint8).reshape(cache.shape[0], -1)
    vals = raw[:, :64 * 128].contiguous().view(torch.float8_e4m3fn).double().view(-1, 64, 128)
    scales = raw[:, 64 * 128:].contiguous().view(torch.float32).double().view(-1, 64, 1)
    kd = vals * scales
    rows = []
    for m in range(q.shape[0]):
        L = int(lens[m])
        pages = bt[m, :(L + 63) // 64].long()
        k = kd[pages].reshape(-1, 128)[:L]
        rows.append((torch.relu(q[m].double() @ k.t()) * w[m].double()[:, None]).sum(0))
    return rows


def test_registered_and_the_catalog_agrees():
    target = get_target("dsa_indexer_topk_fp8")
    assert target.arg_names == ("q_index_fp8", "k_index_cache_fp8", "weights", "seq_lens", "block_table")
    assert all(p.exists() for p in target.seed_paths())


def test_inputs_follow_the_paged_fp8_layout(case):
    (q, cache, w, lens, bt), _ = case
    M, N = SHAPE["rows"], SHAPE["n_ctx"]
    assert q.dtype == torch.float8_e4m3fn and tuple(q.shape) == (M, 64, 128)
    assert cache.dtype == torch.int8 and tuple(cache.shape[1:]) == (64, 1, 132)
    assert w.dtype == torch.float32 and lens.dtype == torch.int32 and bt.dtype == torch.int32
    assert tuple(bt.shape) == (M, (N + 63) // 64)
    assert lens.tolist()[:4] == [N, 2047, 2048, 2049]              # the edges around k come first
    used = torch.cat([bt[m, :(int(lens[m]) + 63) // 64] for m in range(M)])
    assert used.unique().numel() == used.numel()                   # each row owns its pages
    assert not torch.equal(used, torch.sort(used).values)          # and they are shuffled
    # a page's bytes: 64 x 128 FP8 values, then 64 f32 scales (amax / 448 of each token's key)
    vals, scales = t.unpack_pages(cache, bt[0, :2])
    assert vals.shape == (128, 128) and scales.shape == (128,)
    assert torch.allclose(vals.abs().amax(1), torch.full((128,), 448.0, dtype=torch.float64), rtol=0.07)
    kf, ks = t.quantize_fp8(torch.randn(3 * 64, 128))
    packed = t.pack_pages(kf.view(3, 64, 128), ks.view(3, 64))
    back_v, back_s = t.unpack_pages(packed, torch.arange(3))
    assert torch.equal(back_v, kf.double()) and torch.equal(back_s, ks.view(-1).double())


def test_the_reference_is_the_contracts_computation(case):
    inputs, ref = case
    for m, row in enumerate(_plain_reference(inputs)):
        L = row.shape[0]
        got = ref["logits"][m, :L]
        S = ref["band"][m, :L] / t.ACC_EPS                      # sum of |terms|: f64 rounding only
        assert ((got - row).abs() <= 1e-13 * S).all(), m          # the scale after the head sum: same value
        assert torch.isinf(ref["logits"][m, L:]).all()


def test_torch_default_passes_and_pads_short_rows(case):
    inputs, ref = case
    out = t.baseline(*inputs)
    ok, _, message = t.check(out, inputs, ref)
    assert ok, message
    assert (out[1] == -1).sum() == 1 and (out[2] == -1).sum() == 0  # length 2047: one pad


def _select(ref, lens, scores):
    """Global ids of the top-k of `scores` (logical positions, -inf past each row) per row, -1 padded."""
    k_eff = torch.clamp(lens.long(), max=t.K)
    top = scores.topk(t.K, dim=1).indices if scores.shape[1] >= t.K else None
    gid = torch.full_like(ref["sorted_gid"], -1)
    gid.scatter_(1, ref["perm"], ref["sorted_gid"])
    out = gid.gather(1, top)
    return torch.where(torch.arange(t.K)[None, :] < k_eff[:, None], out, -1).to(torch.int32)


def test_an_accumulation_order_difference_passes(case):
    """f32 sums in another order (heads and dims reversed, K scale applied to each head first) differ from the
    exact logits by far less than the band, and the top-k set they give passes."""
    inputs, ref = case
    q, cache, w, lens, bt = inputs
    worst = 0.0
    scores = torch.full_like(ref["logits"], float("-inf"))
    for m in range(q.shape[0]):
        L = int(lens[m])
        k64, s64 = t.unpack_pages(cache, bt[m, :(L + 63) // 64])
        kf, sf = k64[:L].float().flip(1), s64[:L].float()
        qf = q[m].float().flip(0).flip(1)
        s = ((torch.relu(qf @ kf.t()) * sf[None, :]) * w[m].flip(0)[:, None]).sum(0)
        exact, bound, _ = t.row_logits(inputs, m)
        worst = max(worst, float(((s.double() - exact).abs() / bound.clamp(min=1e-300)).max()))
        scores[m, :L] = s.double()
    assert worst < 194 * 2.0 ** -24 < t.ACC_EPS          # the f32 bound, well inside the band
    ok, _, message = t.check(_select(ref, lens, scores), inputs, ref)
    assert ok, message


def test_a_swap_inside_the_band_passes_and_one_outside_it_fails(case):
    inputs, ref = case
    q, cache, w, lens, bt = inputs
    base = _select(ref, lens, ref["logits"])
    r = 0                                       # full row: swap its weakest chosen with its strongest left out
    logits, band = ref["logits"][r], ref["band"][r]
    order = logits.argsort(descending=True)
    kth, nxt = int(order[t.K - 1]), int(order[t.K])
    gid = torch.full_like(ref["sorted_gid"][r], -1)
    gid.scatter_(0, ref["perm"][r], ref["sorted_gid"][r])
    swapped = base.clone()
    swapped[r, (base[r] == gid[kth]).nonzero()[0, 0]] = int(gid[nxt])
    ok, _, message = t.check(swapped, inputs, ref)
    gap = float(logits[kth] - logits[nxt])
    assert ok == (gap <= float(band[kth] + band[nxt])), (gap, message)
    # a token far below the k-th is no rounding: it fails, and the message says why
    far = int(order[-1])
    wrong = base.clone()
    wrong[r, (base[r] == gid[kth]).nonzero()[0, 0]] = int(gid[far])
    ok, _, message = t.check(wrong, inputs, ref)
    assert not ok and "not a top-2048 set" in message


@pytest.mark.parametrize("mistake", ["no_k_scale", "one_head_dropped", "logical_ids", "neighbour_scale"])
def test_real_errors_fail(mistake):
    """What a wrong kernel does: forget the K scale (heavy-tailed scales), drop a head, return logical
    positions instead of page ids, or read the scale of the token beside it. (Keys rounded to bf16 after
    dequantising pass on these values: the band admits what the H200's FP8 MMA was measured to do, 3.2e-4 of
    sum|terms|, and bf16's rounding is of that size; docs/kernels.md.)"""
    family = "heavy_tail" if mistake in ("no_k_scale", "neighbour_scale") else "normal"
    inputs = t.make_inputs(t._shape(3, 6000, family, "full"), 5, "cpu")
    ref = t.reference(inputs)
    q, cache, w, lens, bt = inputs
    scores = torch.full_like(ref["logits"], float("-inf"))
    for m in range(q.shape[0]):
        L = int(lens[m])
        k64, s64 = t.unpack_pages(cache, bt[m, :(L + 63) // 64])
        k64, s64 = k64[:L], s64[:L]
        qm, wm = q[m].double(), w[m].double()
        if mistake == "no_k_scale":
            s64 = torch.ones_like(s64)
        if mistake == "one_head_dropped":
            wm = wm.clone()
            wm[int(wm.abs().argmax())] = 0
        if mistake == "neighbour_scale":
            s64 = s64.roll(1)
        scores[m, :L] = (torch.relu(qm @ k64.t()) * wm[:, None]).sum(0) * s64
    out = _select(ref, lens, scores)
    if mistake == "logical_ids":
        out = torch.where(out >= 0, ref["perm"].gather(1, torch.searchsorted(ref["sorted_gid"], out.long().clamp(min=0))),
                          -1).to(torch.int32)
    ok, _, message = t.check(out, inputs, ref)
    assert not ok, (mistake, message)


def test_structure_errors_are_named(case):
    inputs, ref = case
    good = t.baseline(*inputs)
    dup = good.clone()
    dup[0, 1] = dup[0, 0]
    assert "duplicate" in t.check(dup, inputs, ref)[2] or "pads" in t.check(dup, inputs, ref)[2]
    foreign = good.clone()
    foreign[0, 0] = int(inputs[4][1, 0]) * 64      # a token of row 1's first page
    assert "no token of the row" in t.check(foreign, inputs, ref)[2]
    assert "expected torch.int32" in t.check(good.long(), inputs, ref)[2]

