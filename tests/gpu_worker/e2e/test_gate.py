from pathlib import Path

import pytest
import torch

from gpu_worker.dispatch import Dispatcher, default_topk, single_kernel_config
from gpu_worker.e2e import run_gate
from gpu_worker.e2e.harness import PROFILES
from gpu_worker.e2e.model import DecodeModel, load_preset
from gpu_worker.e2e.parity import compare_steps, selection_valid

HERE = Path(__file__).parent
ROOT = HERE.parents[2]
TINY = (HERE / "tiny_topk_candidate.py").read_text()
SEED = ROOT / "gpu_worker" / "candidates" / "dsa_topk" / "seed.py"
cpu_only = pytest.mark.skipif(
    torch.cuda.is_available(), reason="the CPU path; a CUDA host runs the graph path"
)
gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

FIRST_K = """
import torch
PARAMS = {}
def forward(logits, lengths, k):  # wrong on purpose: the first k positions, not the k largest
    m = logits.shape[0]
    return torch.arange(k, dtype=torch.int32, device=logits.device).repeat(m, 1)
"""


def candidate_sources():
    yield "tiny", TINY
    if SEED.exists():
        yield "seed", SEED.read_text()


def run_step(model, source=None):
    d = Dispatcher("dsa_topk")
    if source is not None:
        d.load(single_kernel_config(target="dsa_topk", hardware="cpu", candidate_id="c", source=source))
    out = model.step(d)
    return d, {"hidden": out.hidden.clone(), "indices": model.indices.clone(), "logits": model.logits.clone()}


@pytest.mark.parametrize("name, source", list(candidate_sources()))
def test_a_triton_candidate_selects_the_default_sets_and_gives_the_same_hidden_state(name, source):
    model = DecodeModel(load_preset("tiny"), batch=3, context=200, device="cpu", seed=7)
    _, ref = run_step(model)
    d, got = run_step(model, source)
    assert d.calls == {"c": model.preset["layers"]}
    for layer in range(model.preset["layers"]):
        for row in range(3):
            assert set(got["indices"][layer, row].tolist()) == set(ref["indices"][layer, row].tolist())
    parity = compare_steps(ref, got, model.lengths, model.topk_k, hidden_rtol=1e-6)
    assert parity["ok"] and parity["hidden_max_err"] == 0.0


def test_a_wrong_selection_fails_parity():
    model = DecodeModel(load_preset("tiny"), batch=2, context=48, device="cpu", seed=3)
    _, ref = run_step(model)
    _, got = run_step(model, FIRST_K)
    parity = compare_steps(ref, got, model.lengths, model.topk_k, hidden_rtol=2e-2)
    assert not parity["sets_agree"] and not parity["ok"]


def test_selection_check_accepts_any_order_and_tie_choice_and_rejects_the_rest():
    logits = torch.tensor([[5.0, 1.0, 3.0, 3.0, 0.0, 9.0]])
    lengths = torch.tensor([5], dtype=torch.int32)  # 9.0 lies past the length
    ok = [[0, 2, 3], [3, 0, 2], [0, 3, 2], [2, 0, 3]]
    bad = [[0, 2, 5], [0, 2, 2], [0, 1, 2], [0, 2, -1], [0, 2, 7]]
    for rows in ok:
        assert selection_valid(logits, lengths, torch.tensor([rows], dtype=torch.int32), 3).all(), rows
    for rows in bad:
        assert not selection_valid(logits, lengths, torch.tensor([rows], dtype=torch.int32), 3).any(), rows
    for tie_choice in ([0, 2], [3, 0]):  # k=2: the boundary value 3.0 sits at positions 2 and 3
        assert selection_valid(logits, lengths, torch.tensor([tie_choice], dtype=torch.int32), 2).all()
    assert not selection_valid(logits, lengths, torch.tensor([[2, 3]], dtype=torch.int32), 2).any()
    short = torch.tensor([2], dtype=torch.int32)
    assert selection_valid(logits, short, torch.tensor([[1, 0, -1]], dtype=torch.int32), 3).all()
    assert not selection_valid(logits, short, torch.tensor([[1, 0, 2]], dtype=torch.int32), 3).any()


@cpu_only
def test_on_cpu_the_gate_runs_the_tiny_preset_eagerly_and_invents_no_timings():
    result = run_gate(target="dsa_topk", candidate_source=TINY, incumbent_source=None, profile="h200")
    assert result["mode"] == "cpu-eager" and result["status"] == "unavailable"
    assert result["grid_hash"] == "sha256:" + PROFILES["cpu"].sha256()
    assert [(p["batch"], p["context"]) for p in result["points"]] == PROFILES["cpu"].grid
    for p in result["points"]:
        assert p["parity"]["ok"] and p["kernel_ran"]
        assert p["candidate_tok_s"] is None and p["ratio"] is None and p["ratio_ci95"] is None
        assert "verdict" not in p  # the GPU side measures; loop.policy decides


@cpu_only
def test_a_bench_run_may_take_the_largest_point_first_and_sees_each_point_as_it_ends():
    seen = []

    def on_point(result):
        seen.append([(p["batch"], p["context"]) for p in result["points"]])

    result = run_gate(target="dsa_topk", candidate_source=TINY, incumbent_source=None, profile="h200",
                      largest_first=True, on_point=on_point)
    order = [(p["batch"], p["context"]) for p in result["points"]]
    assert sorted(order) == sorted(PROFILES["cpu"].grid) and order[0] == (3, 200)
    assert [b * l for b, l in order] == sorted((b * l for b, l in order), reverse=True)
    assert seen == [order[: i + 1] for i in range(len(order))]
    assert result["status"] == "unavailable"


@cpu_only
def test_on_cpu_a_wrong_candidate_fails_the_gate():
    result = run_gate(target="dsa_topk", candidate_source=FIRST_K, incumbent_source=TINY, profile="cpu")
    assert result["status"] == "fail"
    assert not any(p["parity"]["ok"] for p in result["points"])
    assert all(p["parity"]["incumbent_ok"] for p in result["points"])


@pytest.mark.parametrize(
    "grid",
    [
        [(1, 8192)],
        [(1, 8192), (8, 8192), (32, 8192)],
        {"batches": [1, 8, 32, 64], "contexts": [8192, 32768, 131072]},
    ],
)
def test_a_grid_that_differs_from_the_harness_is_a_finding_not_a_score(grid):
    result = run_gate(
        target="dsa_topk", candidate_source=TINY, incumbent_source=None, profile="h200", grid=grid
    )
    assert result["status"] == "fail" and result["points"] == []
    assert [f["code"] for f in result["findings"]] == ["e2e:harness_changed"]


def test_the_harness_grid_itself_is_accepted():
    cpu = PROFILES["cpu"]
    result = run_gate(
        target="dsa_topk",
        candidate_source=TINY,
        incumbent_source=None,
        profile="cpu",
        grid={"batches": list(cpu.batches), "contexts": list(cpu.contexts)},
    )
    assert "e2e:harness_changed" not in [f["code"] for f in result["findings"]]
    assert len(result["points"]) == len(cpu.grid)


@pytest.mark.parametrize(
    "params, code",
    [
        ({"cuda_graphs": False}, "e2e:graphs_off"),
        ({"eager": True}, "e2e:graphs_off"),
        ({"max_batch": 1}, "e2e:harness_changed"),
        ({"context": 4096}, "e2e:harness_changed"),
    ],
)
def test_params_that_steer_the_harness_are_findings(params, code):
    source = TINY.replace('PARAMS = {"num_warps": 4}', f'PARAMS = {{"num_warps": 4, **{params!r}}}')
    assert source != TINY
    result = run_gate(target="dsa_topk", candidate_source=source, incumbent_source=None, profile="h200")
    assert result["status"] == "fail" and result["points"] == []
    assert code in [f["code"] for f in result["findings"]]


def test_a_candidate_that_does_not_load_fails_with_a_finding():
    result = run_gate(
        target="dsa_topk", candidate_source="def forward(:", incumbent_source=None, profile="h200"
    )
    assert result["status"] == "fail" and result["findings"][0]["code"] == "e2e:load_failed"


def test_targets_without_an_e2e_slot_are_skipped():
    result = run_gate(target="rmsnorm", candidate_source=TINY, incumbent_source=None, profile="h200")
    assert result["status"] == "skipped" and "no slot" in result["reason"]


def test_the_default_kernel_is_what_an_empty_dispatcher_serves():
    logits, lengths = torch.randn(2, 300), torch.tensor([300, 17], dtype=torch.int32)
    assert torch.equal(Dispatcher("dsa_topk")(logits, lengths, 20), default_topk(logits, lengths, 20))


@pytest.mark.gpu
@gpu
def test_one_cuda_graph_replays_the_step_and_matches_eager():
    from gpu_worker.e2e.gate import capture_step

    model = DecodeModel(load_preset("mini"), batch=2, context=8192, device="cuda", seed=1)
    eager = model.step(Dispatcher("dsa_topk")).hidden.clone()
    graph, out = capture_step(model, Dispatcher("dsa_topk"))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out.hidden, eager)


@pytest.mark.gpu
@gpu
def test_on_cuda_the_gate_finds_the_candidates_kernel_in_the_graph():
    from gpu_worker.e2e.gate import _run_point_graphs

    cfg = PROFILES["h200"]
    dispatchers = {"default": Dispatcher("dsa_topk"), "candidate": Dispatcher("dsa_topk")}
    dispatchers["candidate"].load(
        single_kernel_config(
            target="dsa_topk", hardware="h200", candidate_id="candidate", source=SEED.read_text()
        )
    )
    findings = []
    point = _run_point_graphs(cfg, load_preset("mini"), 1, 8192, dispatchers, findings)
    assert point["kernel_ran"] and point["parity"]["ok"] and findings == []
