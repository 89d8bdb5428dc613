"""The targets' checks accept every valid answer and catch wrong ones (docs/figures.md, Checking a top-k)."""

import itertools

import pytest
import torch

from gpu_worker.targets import TARGETS, get_target

TOPK = get_target("dsa_topk")
INDEXER = get_target("dsa_indexer_topk")
RMS = get_target("add_rmsnorm")


def _case(target, shape, seed=3):
    inputs = target.make_inputs(shape, seed, "cpu")
    return inputs, target.reference(inputs), target.baseline(*inputs)


@pytest.fixture(scope="module")
def ties():
    return _case(TOPK, {"rows": 5, "n_ctx": 3000, "k": 2048, "values": "ties", "lengths": "ragged"})


def test_every_target_has_the_contract_fields():
    for t in TARGETS.values():
        assert t.dsls == ("triton", "cute")
        full = t.verification_shapes("full")
        for axis, (lo, hi) in t.axes.items():
            assert max(s[axis] for s in full) == hi, f"{t.name}: the largest {axis} must be verified"
        assert t.bytes_min(t.benchmark_shapes("full")[0]) > 0
        assert all(p.name.endswith(".py") for p in t.seed_paths())
    assert TARGETS["dsa_topk"].e2e_slot == "topk"
    assert {"topk", "sort", "argsort", "kthvalue"} <= TARGETS["dsa_topk"].forbidden_torch


def test_a_target_names_an_e2e_slot_exactly_when_the_e2e_step_has_one_for_it():
    # the pipeline runs the gate for a target whose catalog entry names a slot; the gate skips any target the
    # decode step has no slot for: the two lists must agree, or an evaluation reports a skip as its e2e stage
    from gpu_worker.e2e.gate import E2E_TARGETS

    assert {name for name, t in TARGETS.items() if t.e2e_slot} == set(E2E_TARGETS) == {"dsa_topk",
                                                                                      "dsa_indexer_topk_fp8"}


def test_the_default_kernel_passes_its_own_check_on_every_smoke_shape():
    for t in TARGETS.values():
        for shape in t.verify_shapes("smoke", seed=11):
            inputs, ref, out = _case(t, shape)
            ok, _, msg = t.check(out, inputs, ref)
            assert ok, (t.name, shape, msg)


def test_topk_reference_matches_brute_force_on_small_rows():
    shape = {"rows": 6, "n_ctx": 2300, "k": 2048, "values": "ties", "lengths": "ragged"}
    logits, lengths, k = TOPK.make_inputs(shape, 5, "cpu")
    ref = TOPK.reference((logits, lengths, k))
    for i in range(logits.shape[0]):
        row = sorted(logits[i, : int(lengths[i])].tolist(), reverse=True)
        kth = row[min(k, len(row)) - 1]
        assert float(ref["kth"][i]) == kth
        assert int(ref["count_gt"][i]) == sum(v > kth for v in row)


def test_topk_ties_pass_in_any_valid_order(ties):
    inputs, ref, out = ties
    logits, lengths, k = inputs
    # a different valid choice inside the tie bucket: take the last tied positions instead of the first
    alt = out.clone()
    for i in range(logits.shape[0]):
        L = int(lengths[i])
        if L <= k:
            continue
        kth = float(ref["kth"][i])
        row = logits[i, :L]
        above = (row > kth).nonzero().flatten()
        tied = (row == kth).nonzero().flatten()
        take = tied[-(k - above.numel()):]
        chosen = torch.cat([above, take])
        alt[i] = chosen[torch.randperm(k)].int()
        assert not torch.equal(alt[i].sort().values, out[i].sort().values) or tied.numel() == k - above.numel()
    assert TOPK.check(alt, inputs, ref)[0]


def test_topk_check_catches_a_flipped_index_a_dropped_pad_and_duplicates(ties):
    inputs, ref, out = ties
    logits, lengths, k = inputs
    full_row = int((lengths > k).nonzero()[0, 0])
    short_row = int((lengths < k).nonzero()[0, 0])

    flipped = out.clone()
    selected = set(flipped[full_row].tolist())
    outside = next(j for j in range(int(lengths[full_row])) if j not in selected
                   and logits[full_row, j] < ref["kth"][full_row])
    flipped[full_row, 0] = outside
    dropped_pad = out.clone()
    pad_at = int((dropped_pad[short_row] == -1).nonzero()[0, 0])
    dropped_pad[short_row, pad_at] = 0 if 0 not in dropped_pad[short_row].tolist() else int(lengths[short_row]) - 1
    dup = out.clone()
    dup[full_row, 1] = dup[full_row, 0]
    beyond = out.clone()
    beyond[short_row, 0] = int(lengths[short_row])  # past the row's length
    wrong_dtype = out.long()
    for bad in (flipped, dropped_pad, dup, beyond, wrong_dtype, out[:, :-1]):
        ok, _, msg = TOPK.check(bad, inputs, ref)
        assert not ok, msg


def test_ignoring_lengths_is_caught_because_values_past_the_length_are_the_largest():
    shape = {"rows": 4, "n_ctx": 4096, "k": 2048, "values": "normal", "lengths": "ragged"}
    logits, lengths, k = TOPK.make_inputs(shape, 9, "cpu")
    unmasked = logits.topk(k, dim=1).indices.int()
    assert not TOPK.check(unmasked, (logits, lengths, k), TOPK.reference((logits, lengths, k)))[0]


def test_indexer_check_accepts_near_ties_inside_the_band_and_rejects_outside():
    inputs, ref, out = _case(INDEXER, {"rows": 2, "n_ctx": 3000, "k": 2048, "values": "normal", "lengths": "full"})
    assert INDEXER.check(out, inputs, ref)[0]
    s = ref["scores"][0]
    sel = out[0].long()
    kth = float(ref["kth"][0])
    # swap the selected element closest to the boundary with the unselected one closest to it
    unsel = torch.ones_like(s, dtype=torch.bool)
    unsel[sel] = False
    in_pos = int(torch.argmin(s[sel]))
    best_out = int(torch.argmax(torch.where(unsel, s, torch.full_like(s, -1e30))))
    near = out.clone()
    near[0, in_pos] = best_out
    gap = abs(float(s[best_out]) - kth)
    assert (gap <= float(ref["band"][0])) == INDEXER.check(near, inputs, ref)[0]
    far = out.clone()
    far[0, in_pos] = int(torch.argmin(torch.where(unsel, s, torch.full_like(s, 1e30))))
    assert not INDEXER.check(far, inputs, ref)[0]


def test_indexer_reference_matches_a_brute_force_loop():
    q, k_index, weights, lengths, k = INDEXER.make_inputs({"rows": 1, "n_ctx": 50, "k": 2048, "values": "normal",
                                                          "lengths": "full"}, 2, "cpu")
    ref = INDEXER.reference((q, k_index, weights, lengths, k))["scores"]
    for s in (0, 17, 49):
        want = sum(float(weights[0, h]) * max(0.0, float((q[0, h].double() * k_index[s].double()).sum()))
                   for h in range(64))
        assert abs(float(ref[0, s]) - want) <= 1e-9 * max(1.0, abs(want))


def test_rmsnorm_check_catches_one_wrong_element_nan_and_wrong_dtype():
    inputs, ref, (h, y) = _case(RMS, {"tokens": 7, "hidden": 2048})
    assert RMS.check((h, y), inputs, ref)[0]
    y_bad = y.clone()
    y_bad[3, 100] = y_bad[3, 100] * 1.05 + 0.01
    h_bad = h.clone()
    h_bad.view(torch.int16)[0, 0] += 1  # one bf16 ulp
    y_nan = y.clone()
    y_nan[6, 2047] = float("nan")
    for out in ((h, y_bad), (h_bad, y), (h, y_nan), (h, y.half()), (h, y.float()), h, (h,)):
        assert not RMS.check(out, inputs, ref)[0]


def test_rmsnorm_zero_or_constant_output_fails_the_relative_tolerance():
    inputs, ref, (h, y) = _case(RMS, {"tokens": 3, "hidden": 4096})
    for y_const in (torch.zeros_like(y), torch.full_like(y, float(y.float().mean()))):
        assert not RMS.check((h, y_const), inputs, ref)[0]


@pytest.mark.parametrize("name,shape", [(t.name, s) for t in TARGETS.values() for s in t.verify_shapes("smoke", 0)][:4])
def test_make_inputs_is_deterministic_and_nonzero(name, shape):
    t = get_target(name)
    a, b = t.make_inputs(shape, 123, "cpu"), t.make_inputs(shape, 123, "cpu")
    c = t.make_inputs(shape, 124, "cpu")
    for x, y, z in itertools.zip_longest(a, b, c):
        if isinstance(x, torch.Tensor):
            assert torch.equal(x, y)
            if x.is_floating_point():
                assert not torch.equal(x, z) and bool((x != 0).any())  # relu-family rows are mostly zeros by design


def test_only_a_plain_tuple_or_list_is_unpacked_so_a_subclass_runs_no_code_after_the_recorder():
    import torch

    from gpu_worker.targets.base import as_outputs

    class Sneaky(tuple):
        def __iter__(self):
            raise AssertionError("candidate code ran while the harness unpacked the outputs")

    x = torch.zeros(2)
    assert as_outputs((x, x))[1] is x and as_outputs([x]) == [x] and as_outputs(x) == [x]
    sneaky = Sneaky((x,))
    assert as_outputs(sneaky) == [sneaky]  # one output that is not a tensor: the structure check refuses it
