"""An imported FlashInfer-Bench Definition is an ark target that agrees with the built-in one on the same
inputs, and its check (FlashInfer-Bench's per-output tolerance) refuses wrong outputs (docs/interop.md)."""

import json
from pathlib import Path

import pytest
import torch

pytest.importorskip("flashinfer_bench", reason="the fib extra (flashinfer-bench) is not installed")

from gpu_worker.fib.document import DocumentError
from gpu_worker.fib.reader import build_document
from gpu_worker.fib.target import target_from_document
from gpu_worker.targets import get_target

DEFS = Path(__file__).resolve().parents[2] / "gpu_worker" / "fib" / "definitions"
INDEXER = "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"


def definition_text(name: str) -> str:
    return (DEFS / f"{name}.json").read_text()


def rmsnorm_target(hidden: int):
    doc = build_document(definition_text(f"fused_add_rmsnorm_h{hidden}"), ranges=["batch_size=1:16384"])
    return target_from_document(doc)


@pytest.mark.parametrize("hidden", [2048, 4096, 7168])
def test_imported_rmsnorm_agrees_with_the_builtin_add_rmsnorm(hidden):
    imported, builtin = rmsnorm_target(hidden), get_target("add_rmsnorm")
    for tokens, seed in ((1, 1), (37, 2)):
        inputs = imported.make_inputs({"batch_size": tokens}, seed, "cpu")
        builtin_inputs = (*inputs, 1e-6)
        ok, _, message = builtin.check(tuple(imported.reference(inputs)), builtin_inputs, builtin.reference(builtin_inputs))
        assert ok, message  # the definition's reference passes ark's own check (h exact, y within 2^-8)
        ok, _, message = imported.check(builtin.baseline(*builtin_inputs), inputs, imported.reference(inputs))
        assert ok, message  # and ark's default kernel passes the imported check
    # the same inputs built-in side: ark's inputs through the definition's reference
    x, r, w, eps = builtin.make_inputs({"tokens": 5, "hidden": hidden, "values": "large"}, 3, "cpu")
    ok, _, message = builtin.check(tuple(imported.reference((x, r, w))), (x, r, w, eps), builtin.reference((x, r, w, eps)))
    assert ok, message


def test_the_imported_check_refuses_a_wrong_output():
    t = rmsnorm_target(2048)
    inputs = t.make_inputs({"batch_size": 8}, 4, "cpu")
    h, y = t.reference(inputs)
    bad = y.clone()
    bad[3] = (bad[3].float() * 1.1).to(torch.bfloat16)  # one row 10% off: beyond atol and rtol 1e-2
    ok, err, message = t.check((h, bad), inputs, [h, y])
    assert not ok and "output" in message and err > 0
    assert not t.check((h,), inputs, [h, y])[0]
    assert not t.check((h, y.float()), inputs, [h, y])[0]  # dtype
    nan = y.clone()
    nan[0, 0] = float("nan")
    assert not t.check((h, nan), inputs, [h, y])[0]
    assert t.check((h, y), inputs, [h, y])[0]


def test_inputs_follow_the_secret_seed_and_the_shapes_stay_in_range():
    t = rmsnorm_target(4096)
    a, b, c = (t.make_inputs({"batch_size": 3}, s, "cpu") for s in (7, 7, 8))
    assert all(torch.equal(x, y) for x, y in zip(a, b)) and not torch.equal(a[0], c[0])
    shapes = t.verify_shapes("smoke", 11) + t.benchmark_shapes("full")
    assert {s["batch_size"] for s in shapes} >= {1, 16384}
    assert all(1 <= s["batch_size"] <= 16384 for s in shapes)
    assert t.output_spec({"batch_size": 3}) == [((3, 4096), torch.bfloat16)] * 2


def test_a_document_without_a_range_for_a_var_axis_or_with_a_cell_outside_is_refused():
    with pytest.raises(DocumentError, match="no operating range for var axis batch_size"):
        build_document(definition_text("fused_add_rmsnorm_h2048"))
    line = json.dumps({"definition": "fused_add_rmsnorm_h2048",
                       "workload": {"axes": {"batch_size": 9000}, "inputs": {}, "uuid": "a"}})
    with pytest.raises(DocumentError, match="outside the operating range"):
        build_document(definition_text("fused_add_rmsnorm_h2048"), line, ["batch_size=1:4096"])
    with pytest.raises(DocumentError, match="not a FlashInfer-Bench Definition"):
        build_document('{"name": "x"}', "", ["batch_size=1:2"])


def test_indexer_definition_constraints_and_agreement_with_the_builtin_fp8_target():
    """The definition's reference against the built-in FP8 indexer target on its own ragged, paged inputs:
    the reference's selection passes the target's set check (ties within the accumulation band)."""
    text = definition_text(INDEXER)
    ranges = ["batch_size=1:128", "num_pages=1:8192", "max_num_pages=1:4096"]
    doc = build_document(text, ranges=ranges)
    assert doc["definition"]["constraints"] == ["head_dim_with_scale == index_head_dim + 4"]
    from gpu_worker.targets.dsa_indexer_topk_fp8 import TARGET as builtin

    run = target_from_document(doc).baseline
    for shape, seed in (({"rows": 2, "n_ctx": 4096, "k": 2048, "values": "ties", "lengths": "ragged"}, 1),
                        ({"rows": 3, "n_ctx": 2500, "k": 2048, "values": "normal", "lengths": "ragged"}, 2)):
        inputs = builtin.make_inputs(shape, seed, "cpu")
        out = run(*inputs)
        ok, _, message = builtin.check(out, inputs, builtin.reference(inputs))
        assert ok, message
        wrong = out.clone()
        wrong[0, 0] = wrong[0, 1]  # a duplicate token: the built-in check must refuse it
        assert not builtin.check(wrong, inputs, builtin.reference(inputs))[0]
