"""The e2e ceiling: the decode step with the top-k slot replaced by a fixed, precomputed answer."""

from pathlib import Path

import pytest
import torch

from gpu_worker import contract
from gpu_worker.dispatch import Dispatcher
from gpu_worker.e2e import run_gate
from gpu_worker.e2e.ceiling import FixedAnswer, ceiling_summary, fixed_answer_for
from gpu_worker.e2e.model import DecodeModel, load_preset
from gpu_worker.e2e.parity import compare_steps

TINY = (Path(__file__).parent / "tiny_topk_candidate.py").read_text()
cpu_only = pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU path; a CUDA host times the graphs")


def _snapshot(out, model):
    return {"hidden": out.hidden.clone(), "indices": model.indices.clone(), "logits": model.logits.clone()}


def test_the_fixed_answer_gives_the_default_step_bit_for_bit_on_every_step():
    model = DecodeModel(load_preset("tiny"), batch=3, context=200, device="cpu", seed=5)
    ref = _snapshot(model.step(Dispatcher("dsa_topk")), model)
    fixed = fixed_answer_for("dsa_topk", ref)
    for _ in range(2):  # a graph captures after warm-up steps: the answer must follow the layers each step
        got = _snapshot(model.step(fixed), model)
        assert torch.equal(got["hidden"], ref["hidden"]) and torch.equal(got["indices"], ref["indices"])
        parity = compare_steps(ref, got, model.lengths, model.topk_k, hidden_rtol=0.0)
        assert parity["ok"]
    assert fixed.calls == 2 * model.preset["layers"]


def test_a_fixed_answer_from_another_batch_breaks_parity():
    # the answer must be the step's own: one built for other inputs changes the outputs and is caught
    model = DecodeModel(load_preset("tiny"), batch=3, context=200, device="cpu", seed=5)
    ref = _snapshot(model.step(Dispatcher("dsa_topk")), model)
    other = DecodeModel(load_preset("tiny"), batch=3, context=200, device="cpu", seed=6)
    wrong = FixedAnswer(_snapshot(other.step(Dispatcher("dsa_topk")), other)["indices"])
    got = _snapshot(model.step(wrong), model)
    assert not compare_steps(ref, got, model.lengths, model.topk_k, hidden_rtol=2e-2)["ok"]


def test_attained_of_a_possible():
    # the figures: 1.149x of a possible 1.22x is 94% of the ceiling and 68% of the possible gain
    s = ceiling_summary(1000.0, 1149.0, 1220.0)
    assert s["ceiling_ratio"] == pytest.approx(1.22)
    assert s["ceiling_attained"] == pytest.approx(0.9418, abs=1e-4)
    assert s["gain_attained"] == pytest.approx(149 / 220)
    assert ceiling_summary(None, 1.0, 2.0) == {"ceiling_ratio": None, "ceiling_attained": None, "gain_attained": None}


@cpu_only
def test_on_cpu_every_point_checks_the_ceiling_step_and_invents_no_ceiling_timing():
    result = run_gate(target="dsa_topk", candidate_source=TINY, incumbent_source=None, profile="cpu")
    assert result["points"]
    for p in result["points"]:
        assert p["ceiling_parity"]["ok"] and p["ceiling_parity"]["hidden_max_err"] == 0.0
        assert p["ceiling_tok_s"] is None
    stage = contract.E2EStage.from_dict(dict(result, seconds=0.0))  # the point fits the report contract
    assert stage.points[0].ceiling_parity["ok"]


def test_the_contract_lists_its_additions_and_reads_a_report_without_them():
    for record, names in contract.ADDITIONS["2026-12-04"].items():
        cls = getattr(contract, record)
        defaults = {f.name: f.default for f in contract.fields(cls)}
        assert all(name in defaults and defaults[name] is None for name in names), record
    point = contract.E2EPoint.from_dict({"batch": 1, "context": 8, "ceiling_tok_s": 1.0, "ceiling_attained": 0.9})
    assert point.to_dict()["ceiling_attained"] == 0.9
    assert contract.E2EPoint.from_dict({"batch": 1, "context": 8}).ceiling_tok_s is None
    with pytest.raises(contract.ContractError, match="ceiling_tokens"):
        contract.E2EPoint.from_dict({"batch": 1, "context": 8, "ceiling_tokens": 1.0})
