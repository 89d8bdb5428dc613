"""The e2e step's second slot, dsa_indexer_topk_fp8: the whole FP8 indexer served through dispatch over a paged
cache (gpu_worker/e2e/model.py), checked on a CPU with the tiny_fp8 preset (the contract's 64 heads x 128,
top-2048; Triton's interpreter)."""

from pathlib import Path

import pytest
import torch

from gpu_worker.dispatch import Dispatcher, single_kernel_config
from gpu_worker.dispatch.default import default_indexer_topk_fp8
from gpu_worker.e2e import run_gate
from gpu_worker.e2e.gate import _compare, _snapshot
from gpu_worker.e2e.harness import PROFILES
from gpu_worker.e2e.model import DecodeModel, load_preset
from gpu_worker.targets import dsa_indexer_topk_fp8 as fp8

ROOT = Path(__file__).resolve().parents[3]
SEED = (ROOT / "gpu_worker" / "candidates" / "dsa_indexer_topk_fp8" / "seed.py").read_text()
# the seed reading logical page p as physical page p: right only where the block table is the identity
IGNORES_TABLE = SEED.replace(
    "page = tl.load(bt_ptr + m.to(tl.int64) * stride_bt + pos // PG, mask=inb, other=0).to(tl.int64)",
    "page = (pos // PG).to(tl.int64)").replace(
    "page = tl.load(bt_ptr + m.to(tl.int64) * stride_bt + j // PG, mask=live, other=0)", "page = j // PG")
SLOT = "dsa_indexer_topk_fp8"
cpu_only = pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU path; a CUDA host times the graphs")


def _model(batch=3, context=2200, seed=7, slot=SLOT, preset="tiny_fp8"):
    return DecodeModel(load_preset(preset), batch=batch, context=context, device="cpu", seed=seed, slot=slot)


def _serving(source):
    d = Dispatcher(SLOT)
    d.load(single_kernel_config(target=SLOT, hardware="cpu", candidate_id="c", source=source))
    return d


def test_the_default_kernel_meets_the_targets_own_check():
    for i, shape in enumerate([fp8._shape(3, 2500, "relu"), fp8._shape(2, 4100, "ties", "full")]):
        inputs = fp8.make_inputs(shape, 11 + i, "cpu")
        ok, _, message = fp8.check(default_indexer_topk_fp8(*inputs), inputs, fp8.reference(inputs))
        assert ok, (shape, message)


def test_the_paged_cache_holds_the_contiguous_models_keys_before_and_after_a_step():
    """Same seed, same weights and keys in both slots' models: row b's pages, read through the block table,
    are the dsa_topk model's FP8 keys and scales byte for byte, and stay so after a step writes the new token
    into its page; the two steps select the same sets (each checked by its own rule)."""
    paged, flat = _model(), _model(slot="dsa_topk")
    assert not torch.equal(paged.block_table.view(-1).sort().values, paged.block_table.view(-1))  # shuffled

    def same_keys():
        for lp, lf in zip(paged.layers, flat.layers):
            for b in range(paged.batch):
                k, s = fp8.unpack_pages(lp["idx_pages"], paged.block_table[b])
                L = flat.context
                assert torch.equal(k[:L], lf["idx_cache"][b].double())
                assert torch.equal(s[:L], lf["idx_scale"][b].double())

    same_keys()
    out_p = _snapshot(paged.step(Dispatcher(SLOT)), paged)
    out_f = flat.step(Dispatcher("dsa_topk"))
    same_keys()
    assert torch.equal(out_p["hidden"], out_f.hidden)
    for layer in range(paged.preset["layers"]):
        for b in range(paged.batch):
            assert set(out_p["indices"][layer, b].tolist()) == set(flat.indices[layer, b].tolist())


def test_the_seed_passes_parity_and_its_sets_are_the_defaults():
    model = _model()
    ref = _snapshot(model.step(Dispatcher(SLOT)), model)
    d = _serving(SEED)
    got = _snapshot(model.step(d), model)
    assert d.calls == {"c": model.preset["layers"]}
    parity = _compare(ref, got, model, PROFILES["cpu_fp8"])
    assert parity["ok"] and parity["hidden_max_err"] == 0.0, parity
    assert (got["slot_out"] >= 0).sum() == (ref["slot_out"] >= 0).sum()


def test_a_kernel_that_ignores_the_block_table_fails_parity_with_the_targets_message():
    assert IGNORES_TABLE != SEED
    model = _model()
    ref = _snapshot(model.step(Dispatcher(SLOT)), model)
    got = _snapshot(model.step(_serving(IGNORES_TABLE)), model)
    parity = _compare(ref, got, model, PROFILES["cpu_fp8"])
    assert not parity["ok"] and "no token of the row" in parity["check"], parity


def test_a_preset_that_does_not_fit_the_contract_is_refused():
    with pytest.raises(ValueError, match="does not fit the dsa_indexer_topk_fp8 contract"):
        _model(preset="tiny")


@cpu_only
def test_the_gate_checks_every_point_and_its_ceiling_on_a_cpu():
    result = run_gate(target=SLOT, candidate_source=SEED, incumbent_source=None, profile="h200")
    assert result["profile"] == "cpu_fp8" and result["status"] == "unavailable", result
    assert [(p["batch"], p["context"]) for p in result["points"]] == [(1, 200), (3, 200), (1, 2200), (3, 2200)]
    for p in result["points"]:
        assert p["parity"]["ok"] and p["kernel_ran"] and p["ceiling_parity"]["ok"], p
        assert p["ceiling_parity"]["hidden_max_err"] == 0.0 and p["ceiling_tok_s"] is None
    wrong = run_gate(target=SLOT, candidate_source=IGNORES_TABLE, incumbent_source=None, profile="h200")
    assert wrong["status"] == "fail" and not all(p["parity"]["ok"] for p in wrong["points"])


def test_the_default_logits_kernel_in_the_interpreter_equals_the_torch_path():
    """The Triton kernel a GPU runs for the default's logits (dispatch/paged_logits.py), run here in Triton's
    interpreter: the same logits as the CPU's torch path up to f32 summation order, and no page at or past a
    row's length is written."""
    pytest.importorskip("triton")
    import os

    from gpu_worker.dispatch import paged_logits as pl
    if not os.environ.get("TRITON_INTERPRET"):
        pytest.skip("needs Triton's interpreter (TRITON_INTERPRET=1 before triton is imported)")
    inputs = fp8.make_inputs(fp8._shape(3, 2500, "heavy_tail"), 5, "cpu")
    q, cache, w, lens, bt = inputs
    want = pl.paged_logits(*inputs)
    B = q.shape[0]
    got = pl.launch(*inputs, torch.full((B, bt.shape[1] * 64), float("nan")))
    assert int(lens.min()) + 64 <= bt.shape[1] * 64  # a ragged row: whole pages of its table past its length
    for b in range(B):
        L, end = int(lens[b]), (int(lens[b]) + 63) // 64 * 64
        scale = float(want[b, :L].abs().max())
        assert float((got[b, :L] - want[b, :L]).abs().max()) <= 1e-5 * scale
        assert bool(torch.isnan(got[b, end:]).all())


COMPILE_SM90 = """
import re, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from gpu_worker.dispatch.paged_logits import _paged_logits_kernel, PAGE, PAGE_BYTES
sig = {"q_ptr": "*fp8e4nv", "w_ptr": "*fp32", "kv_ptr": "*fp8e4nv", "ks_ptr": "*fp32", "len_ptr": "*i32",
       "bt_ptr": "*i32", "out_ptr": "*fp32", "stride_bt": "i32", "stride_ob": "i32",
       "H": "constexpr", "D": "constexpr", "PG": "constexpr", "PB": "constexpr"}
src = ASTSource(fn=_paged_logits_kernel, signature=sig, constexprs={"H": 64, "D": 128, "PG": PAGE, "PB": PAGE_BYTES})
ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4}).asm["ptx"]
print(sorted(set(re.findall(r"wgmma\\.mma_async[\\w.]*", ptx))))
"""


def test_the_default_logits_kernel_compiles_for_sm90_with_an_fp8_wgmma():
    """The interpreter accepts what Triton's compiler may refuse: the kernel a GPU runs compiles here for sm_90a
    (no GPU needed), its FP8 dot as the e4m3 WGMMA."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, "-c", COMPILE_SM90], capture_output=True, text=True, env=env, cwd=ROOT,
                       timeout=300, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3" in r.stdout, r.stdout
