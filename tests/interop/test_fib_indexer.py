"""The FP8 indexer Definition imported with the generators ark declares for it (lengths, a page table over the
cache, the FP8 cache with its scales) and the built-in target's set check verifies on CPU: its own default and
the built-in seed pass, a kernel that ignores the block table or mis-pads a short row fails, and the imported
target agrees with the built-in dsa_indexer_topk_fp8 on the same inputs (docs/interop.md)."""

import json
import os
from pathlib import Path

import pytest
import torch

pytest.importorskip("flashinfer_bench", reason="the fib extra (flashinfer-bench) is not installed")

from gpu_worker.fib.document import DocumentError
from gpu_worker.fib.reader import build_document
from gpu_worker.fib.target import _Imported, target_from_document
from gpu_worker.pipeline.bench_child import held_out_shapes
from gpu_worker.targets import TARGETS
from gpu_worker.targets import dsa_indexer_topk_fp8 as builtin

ROOT = Path(__file__).resolve().parents[2]
DEFS = ROOT / "gpu_worker" / "fib" / "definitions"
NAME = "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"
TEXT = (DEFS / f"{NAME}.json").read_text()
SIDECAR = json.loads((DEFS / f"{NAME}.inputs.json").read_text())
# tiny for Triton's interpreter: at least two rows (the second one token long: all padding after it), rows up
# to 40 pages (2560 tokens: past k = 2048, so the full top-k path runs too), a cache of 40 to 96 pages
RANGES = ["batch_size=2:3", "num_pages=40:96", "max_num_pages=34:40"]
# the built-in seed (Triton: it runs in the interpreter; the best's logits are CuTe DSL, compile-only on a CPU)
SEED = (ROOT / "gpu_worker" / "candidates" / "dsa_indexer_topk_fp8" / "seed.py").read_text()
# the seed, but reading page p of a row as physical page p (the block table ignored) ...
IGNORES_TABLE = SEED.replace(
    "page = tl.load(bt_ptr + m.to(tl.int64) * stride_bt + pos // PG, mask=inb, other=0).to(tl.int64)",
    "page = (pos // PG).to(tl.int64)").replace(
    "page = tl.load(bt_ptr + m.to(tl.int64) * stride_bt + j // PG, mask=live, other=0)", "page = j // PG")
# ... and padding a short row with 0 (a real token id) instead of -1
MISPADS = SEED.replace("tl.store(nidx_row + offs, tl.full([KBLOCK], -1, tl.int32), mask=(offs >= k_eff) & (offs < K))",
                       "tl.store(nidx_row + offs, tl.full([KBLOCK], 0, tl.int32), mask=(offs >= k_eff) & (offs < K))")


def document(**changes):
    return build_document(TEXT, ranges=RANGES, **{**SIDECAR, **changes})


def test_the_generators_draw_valid_paged_inputs():
    t = target_from_document(document(), builtins=TARGETS)
    shapes = t.verify_shapes("smoke", 11)
    assert len(shapes) >= 4 and {s["batch_size"] for s in shapes} >= {2, 3}
    for i, shape in enumerate(shapes):
        q, cache, weights, lengths, table = t.make_inputs(shape, 30 + i, "cpu")
        B, P, W = shape["batch_size"], shape["num_pages"], shape["max_num_pages"]
        assert (q.dtype, cache.dtype, lengths.dtype, table.dtype) == (torch.float8_e4m3fn, torch.int8, torch.int32, torch.int32)
        assert tuple(cache.shape) == (P, 64, 1, 132) and tuple(table.shape) == (B, W)
        assert int(lengths[0]) == W * 64 and int(lengths[1]) == 1 and bool((lengths >= 1).all())
        for b in range(B):
            n = (int(lengths[b]) + 63) // 64
            row = table[b, :n].tolist()
            assert len(set(row)) == n and all(0 <= p < P for p in row), (shape, b)  # distinct pages of the cache
            assert not bool(table[b, n:].any())
        flat = cache.view(torch.uint8).reshape(P, -1)
        scales = flat[:, 64 * 128:].contiguous().view(torch.float32)
        values = flat[:, :64 * 128].contiguous().view(torch.float8_e4m3fn).float()
        assert bool(torch.isfinite(scales).all()) and bool((scales > 0).all()) and bool(torch.isfinite(values).all())
        assert float(values.abs().amax()) == 448.0  # each token's largest value at the FP8 maximum: scale = amax / 448
    a, b = (t.make_inputs(shapes[1], 5, "cpu") for _ in range(2))
    assert all(torch.equal(x.view(torch.uint8) if x.dtype == torch.float8_e4m3fn else x,
                           y.view(torch.uint8) if y.dtype == torch.float8_e4m3fn else y) for x, y in zip(a, b))
    c = t.make_inputs(shapes[1], 6, "cpu")
    assert not torch.equal(a[4], c[4])  # the page table follows the seed


def test_flashinfer_bench_alone_draws_no_valid_page_table():
    """Why the generators exist: without them the same Definition gets FlashInfer-Bench's random integers."""
    t = target_from_document(build_document(TEXT, ranges=RANGES), builtins=TARGETS)
    _, cache, _, lengths, table = t.make_inputs({"batch_size": 3, "num_pages": 40, "max_num_pages": 34}, 1, "cpu")
    assert bool((lengths < 0).any()) or bool((table < 0).any()) or bool((table >= 40).any())


def test_the_default_and_the_builtin_agree_with_the_imported_target_on_the_same_inputs():
    """Both ways: on the imported target's inputs the Definition's run and the built-in target's torch default
    (the imported default: the Definition's run broke CUDA graph capture on the H200) pass the check; on the
    built-in target's inputs the same."""
    imported = target_from_document(document(), builtins=TARGETS)
    assert imported.baseline is builtin.baseline
    run = _Imported(document(), TARGETS).run_reference
    for i, shape in enumerate(imported.verify_shapes("smoke", 3)):
        inputs = imported.make_inputs(shape, 40 + i, "cpu")
        ref = imported.reference(inputs)
        for name, out in (("definition run", run(*inputs)), ("built-in default", builtin.baseline(*inputs))):
            ok, _, message = imported.check(out, inputs, ref)
            assert ok, (name, shape, message)
            ok, _, message = builtin.check(out, inputs, builtin.reference(inputs))
            assert ok, (name, shape, message)
        wrong = run(*inputs)
        wrong[1, 5] = 0  # a short row's pad made a token id
        assert not imported.check(wrong, inputs, ref)[0]
    inputs = builtin.make_inputs(builtin._shape(2, 2500, "ties"), 7, "cpu")
    ok, _, message = imported.check(run(*inputs), inputs, imported.reference(inputs))
    assert ok, message


def test_declarations_that_cannot_work_are_refused():
    with pytest.raises(DocumentError, match="unknown generator kind 'zipf'"):
        document(inputs={"seq_lens": {"kind": "zipf"}})
    with pytest.raises(DocumentError, match="must name an input with a lengths generator"):
        document(inputs={"block_table": {"kind": "page_table", "lengths": "weights", "cache": "k_index_cache_fp8"}})
    with pytest.raises(DocumentError, match="names rows, which are no axes"):
        document(inputs={**SIDECAR["inputs"], "seq_lens": {"kind": "lengths", "max": "rows * 64"}})
    with pytest.raises(DocumentError, match="the definition has no such input"):
        document(inputs={"lengths": {"kind": "lengths", "max": "1"}})
    with pytest.raises(DocumentError, match="not a built-in target"):
        document(check="dsa_indexer")
    with pytest.raises(DocumentError, match="no corner of the operating range is a valid shape"):
        build_document(TEXT, ranges=["batch_size=1:2", "num_pages=1:8", "max_num_pages=20:40"], **SIDECAR)
    # a shape whose table is wider than the cache has pages is skipped when drawing, not drawn wrong
    t = target_from_document(build_document(TEXT, ranges=["batch_size=2:2", "num_pages=30:60", "max_num_pages=34:40"],
                                            **SIDECAR), builtins=TARGETS)
    shapes = t.verify_shapes("smoke", 1) + t.benchmark_shapes("full")
    assert shapes and all(s["max_num_pages"] <= s["num_pages"] for s in shapes)


def spec(source: str) -> dict:
    return {"candidate_id": "fib-idx", "target": NAME, "profile": "smoke", "e2e": False, "source": source,
            "target_document": json.loads(json.dumps(document()))}


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("TRITON_INTERPRET"), reason="runs the Triton candidates in the interpreter")
def test_the_builtin_seed_passes_the_imported_indexer_and_broken_kernels_fail():
    from gpu_worker.pipeline import evaluate

    report = evaluate(spec(SEED))
    verify = report["stages"]["verify"]
    assert report["stages"]["guard"]["status"] == "pass", report["stages"]["guard"]
    assert verify["status"] == "pass" and len(verify["shapes"]) >= 4, verify
    assert report["verdict"]["status"] == "pass"
    for broken, says in ((IGNORES_TABLE, "no token of the row"), (MISPADS, "pads (-1) not exactly past")):
        assert broken != SEED
        report = evaluate(spec(broken))
        assert report["stages"]["verify"]["status"] == "fail", report["stages"]["verify"]
        messages = [s["message"] for s in report["stages"]["verify"]["shapes"] if s["pass"] is False]
        assert messages and says in messages[0], messages


def test_a_declaration_the_definitions_own_reference_fails_is_refused_on_import():
    """The reference must pass the declared check on ark's inputs: another contract's check, or the set check
    without the generators (FlashInfer-Bench's random page ids), is refused when imported, not on every run."""
    with pytest.raises(DocumentError, match="own reference does not pass the declared check.*RuntimeError"):
        document(check="dsa_indexer_topk")  # the bf16 indexer's contract: a dense [B, N, 128] key tensor
    with pytest.raises(DocumentError, match="own reference does not pass the declared check.*out of bounds"):
        build_document(TEXT, ranges=RANGES, check="dsa_indexer_topk_fp8")
    with pytest.raises(DocumentError, match="takes 3 inputs"):
        document(check="dsa_topk")


def test_a_gpu_verifies_every_axis_at_its_end_at_once_and_a_cpu_host_does_not():
    """The ends one axis at a time never meet the batch's largest rows at the longest context: a kernel wrong
    only there (the red team's many-long-rows family) would pass them. A GPU verifies that corner too."""
    t = target_from_document(document(), builtins=TARGETS)
    corner = {"batch_size": 3, "num_pages": 96, "max_num_pages": 40}
    axes = lambda shapes: [{a: s[a] for a in corner} for s in shapes]  # noqa: E731
    assert corner not in axes(t.verify_shapes("smoke", 1, device="cpu"))
    assert corner in axes(t.verify_shapes("smoke", 1, device="cuda"))
    one_axis = target_from_document(build_document(TEXT, ranges=["batch_size=2:3", "num_pages=96:96",
                                                                  "max_num_pages=40:40"], **SIDECAR), builtins=TARGETS)
    assert one_axis.gpu_shapes == ()  # one var axis: its high end is already one of the listed ends


def test_held_out_shapes_spread_over_the_declared_range_on_a_gpu(monkeypatch):
    """The production range (the one bench/fib_eval_h200.sh declares): its smallest cache is past a CPU host's
    budget, so every CPU draw falls back to the low corner; on a GPU the held-out draws spread over the range
    (on an H100 both had come out at the low corner, the same as a listed shape)."""
    wide = target_from_document(build_document(TEXT, ranges=["batch_size=1:64", "num_pages=2048:8192",
                                                              "max_num_pages=64:2048"], **SIDECAR), builtins=TARGETS)
    low = {"batch_size": 1, "num_pages": 2048, "max_num_pages": 64}
    axes = lambda s: {a: s[a] for a in low}
    assert [axes(wide.random_shape("full", s)) for s in range(3)] == [low] * 3   # a CPU host: the low corner
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    drawn = [axes(s) for seed in range(8) for s in held_out_shapes(wide, seed)]
    assert len({tuple(sorted(d.items())) for d in drawn}) >= 12 and low not in drawn
    assert all(1 <= d["batch_size"] <= 64 and 2048 <= d["num_pages"] <= 8192 and 64 <= d["max_num_pages"] <= 2048
               for d in drawn)
