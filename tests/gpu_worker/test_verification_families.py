"""Each value family makes the shortcut it is there for visible, and the verify set covers the range.

The families exist so that a reduced-precision selection or accumulation (where the contract is f32)
fails the target's own check on the family's inputs, while the f32 default passes the same inputs."""

import math

import pytest
import torch

from gpu_worker.pipeline import referee
from gpu_worker.targets import TARGETS, get_target
from gpu_worker.targets import _topk_common as tc

TOPK, INDEXER, RMS = get_target("dsa_topk"), get_target("dsa_indexer_topk"), get_target("add_rmsnorm")
SINGLE = [t for t in TARGETS.values() if t.name in ("dsa_topk", "dsa_indexer_topk", "dsa_indexer_topk_fp8", "add_rmsnorm")]


def _topk_shape(family, rows=3, n_ctx=6000, lengths="ragged"):
    return {"rows": rows, "n_ctx": n_ctx, "k": 2048, "values": family, "lengths": lengths}


# Where a known shortcut stops being right (tests/redteam/candidates/verify_*_past_*.py): every device's
# verify set has a shape beyond it.
BOUNDARIES = {"dsa_topk": ("n_ctx", 65536), "dsa_indexer_topk": ("n_ctx", 65536), "dsa_indexer_topk_fp8": ("n_ctx", 65536),
              "add_rmsnorm": ("tokens", 8192)}


def _assert_covers(target, fixed, device, ends):
    for axis, bins in target.axis_classes.items():
        lo, hi = target.axes[axis]
        values = [s[axis] for s in fixed]
        assert lo in values, f"{target.name} on {device}: the lower end of {axis}"
        if ends:
            assert hi in values, f"{target.name} on {device}: the upper end of {axis}"
        for b0, b1 in bins:
            assert any(b0 <= v <= b1 for v in values), f"{target.name} on {device}: no shape in {axis} {b0}-{b1}"
    assert {s["values"] for s in fixed} == set(target.value_families), device
    if "lengths" in fixed[0]:
        assert {s["lengths"] for s in fixed} == {"full", "ragged"}, device
    axis, edge = BOUNDARIES[target.name]
    assert any(s[axis] > edge for s in fixed), f"{target.name} on {device}: nothing past {axis} {edge}"


@pytest.mark.parametrize("target", SINGLE, ids=lambda t: t.name)
def test_the_verify_set_covers_every_bin_both_ends_and_every_family(target):
    for axis, bins in target.axis_classes.items():
        lo, hi = target.axes[axis]
        assert bins[0][0] == lo and bins[-1][1] == hi
        assert all(a[1] + 1 == b[0] for a, b in zip(bins, bins[1:])), f"{axis}: the bins tile the range"
    for device in ("cpu", "cuda"):
        shapes = target.verify_shapes("smoke", 5, device)
        assert shapes[:-1] == target.verify_shapes("full", 6, device)[:-1], "profiles verify the same shapes"
    gpu = target.verify_shapes("smoke", 5, "cuda")[:-1]
    _assert_covers(target, gpu, "cuda", ends=True)
    assert any(all(s[a] == target.axes[a][1] for a in target.axes) for s in gpu), "the largest corner on a GPU"


@pytest.mark.parametrize("target", SINGLE, ids=lambda t: t.name)
def test_a_cpu_host_verifies_the_range_scaled_down_with_every_bin_and_boundary(target):
    """Triton's interpreter runs every program instance in Python: a CPU host gets the declared
    cpu_shapes (docs/verification.md), each strictly cheaper than the GPU set and still covering it."""
    cpu = target.verify_shapes("smoke", 5, "cpu")[:-1]
    assert cpu == list(target.cpu_shapes)
    _assert_covers(target, cpu, "cpu", ends=False)

    def elements(shapes):
        return sum(math.prod(v for v in s.values() if isinstance(v, int) and v != s.get("k")) for s in shapes)
    assert elements(cpu) < elements(target.verification_shapes("smoke")), "the CPU set is the cheaper one"
    assert cpu[0] == min(cpu, key=lambda s: elements([s])), "the cheapest shape first: it takes the burst of calls"


@pytest.mark.parametrize("target", SINGLE, ids=lambda t: t.name)
def test_a_cpu_host_calls_its_costliest_shapes_once_and_varies_pointer_and_contents_on_the_others(target):
    """TargetSpec.cpu_first_call_only: shapes a CPU host verifies, each with the first call alone; every other
    CPU shape keeps the moved and refresh runs, and a GPU runs them on every shape."""
    cpu = target.verify_shapes("smoke", 5, "cpu")
    once = [i for i, s in enumerate(cpu) if target.first_call_only(s, "cpu")]
    assert len(once) == len(target.cpu_first_call_only), "each listed shape is one a CPU host verifies"
    assert 0 not in once, "the first shape takes the burst of calls"
    for i, shape in enumerate(cpu):
        tags = {r.tag for r in referee.runs_for(i, "cpu", target.first_call_only(shape, "cpu"))}
        assert tags == ({"first"} if i in once else {"first", "moved", "refresh"} | ({"later"} if i == 0 else set()))
    assert len(cpu) - len(once) >= 3, "most CPU shapes keep every run"
    assert not any(target.first_call_only(s, "cuda") for s in target.verify_shapes("smoke", 5, "cuda"))


@pytest.mark.parametrize("target", SINGLE, ids=lambda t: t.name)
def test_the_drawn_shape_stays_in_range_and_draws_every_family(target):
    seen = set()
    for seed in range(200):
        s = target.random_shape("smoke", seed)
        for axis, (lo, hi) in target.axes.items():
            assert lo <= s[axis] <= hi
        seen.add(s["values"])
    # a family too costly to make at a drawn size on a CPU host (dsa_topk's "indexer" logits) is met in the
    # fixed verify shapes instead: every family is verified, by a draw or by a fixed shape
    fixed = {shape["values"] for shape in target.verify_shapes("smoke", 0, "cpu")}
    assert seen <= set(target.value_families) and seen | fixed == set(target.value_families)
    assert len(seen) >= len(target.value_families) - 1


@pytest.mark.parametrize("target", SINGLE, ids=lambda t: t.name)
def test_every_family_passes_the_default_and_an_unknown_one_is_refused(target):
    for family in target.value_families:
        shape = (_topk_shape(family, 2, 4500) if "n_ctx" in target.axes
                 else {"tokens": 5, "hidden": 2048, "values": family})
        inputs = target.make_inputs(shape, 9, "cpu")
        ok, _, msg = target.check(target.baseline(*inputs), inputs, target.reference(inputs))
        assert ok, (target.name, family, msg)
        again = target.make_inputs(shape, 9, "cpu")
        assert all(torch.equal(a, b) for a, b in zip(inputs, again) if isinstance(a, torch.Tensor))
    with pytest.raises(ValueError):
        target.make_inputs(dict(shape, values="no_such_family"), 9, "cpu")


def test_relu_family_has_many_exact_zeros_and_the_kth_value_is_zero():
    logits, lengths, k = TOPK.make_inputs(_topk_shape("relu", lengths="full"), 1, "cpu")
    assert float((logits == 0).float().mean()) > 0.6
    assert bool((TOPK.reference((logits, lengths, k))["kth"] == 0).all())


def test_heavy_tail_family_spans_many_decades():
    logits, _, _ = TOPK.make_inputs(_topk_shape("heavy_tail", lengths="full"), 1, "cpu")
    mag = logits.abs()
    assert float(mag.max() / mag.median()) > 1e3


def test_a_bf16_or_fp16_selection_fails_near_bf16_and_f32_passes():
    inputs = TOPK.make_inputs(_topk_shape("near_bf16"), 2, "cpu")
    logits, lengths, k = inputs
    ref = TOPK.reference(inputs)
    assert TOPK.check(tc.torch_masked_topk(logits, lengths, k), inputs, ref)[0]
    for dtype in (torch.bfloat16, torch.float16):
        reduced = tc.torch_masked_topk(logits.to(dtype).float(), lengths, k)
        ok, _, msg = TOPK.check(reduced, inputs, ref)
        assert not ok, (dtype, msg)


def test_indexer_logits_kept_in_bf16_fail_near_bf16():
    from gpu_worker.targets.dsa_indexer_topk import scores
    inputs = INDEXER.make_inputs(_topk_shape("near_bf16", 2, 5000), 4, "cpu")
    q, k_index, weights, lengths, k = inputs
    ref = INDEXER.reference(inputs)
    f32 = tc.torch_masked_topk(scores(q, k_index, weights, torch.float32), lengths, k)
    assert INDEXER.check(f32, inputs, ref)[0]
    rounded = scores(q, k_index, weights, torch.float32).to(torch.bfloat16).float()
    ok, _, msg = INDEXER.check(tc.torch_masked_topk(rounded, lengths, k), inputs, ref)
    assert not ok, msg


def test_indexer_relu_family_scores_are_mostly_exact_zeros():
    from gpu_worker.targets.dsa_indexer_topk import scores
    q, k_index, weights, lengths, k = INDEXER.make_inputs(_topk_shape("relu", 1, 8000), 4, "cpu")
    s = scores(q, k_index, weights, torch.float64)
    assert float((s == 0).double().mean()) > 0.8


def _fp16_squares(x, residual, weight, eps):
    """add_rmsnorm with each h^2 formed in fp16 and summed in f32: a shortcut the normal family hides."""
    h = x + residual
    hh = h.to(torch.float16)
    ms = (hh * hh).float().mean(-1, keepdim=True)
    return h, (h.float() * torch.rsqrt(ms + eps) * weight.float()).to(torch.bfloat16)


def test_rmsnorm_fp16_squares_pass_normal_values_and_fail_every_other_family():
    for family in RMS.value_families:
        inputs = RMS.make_inputs({"tokens": 4, "hidden": 4096, "values": family}, 3, "cpu")
        ok, _, msg = RMS.check(_fp16_squares(*inputs), inputs, RMS.reference(inputs))
        assert ok == (family == "normal"), (family, msg)
