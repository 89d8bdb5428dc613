"""The e2e gate serving a route set on the CPU path (cpu-eager, the tiny preset): every decode step's top-k
calls go through the dispatcher with the route set, each point and the stage count the calls per route,
and the routing is real: a wrong candidate routed to one cell breaks parity at that point only."""

import os

import pytest
import torch

# Triton picks its interpreter when triton.language is first imported; on a CPU host that must be now.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from gpu_worker import contract
from gpu_worker.e2e import run_gate
from gpu_worker.e2e.harness import PROFILES
from gpu_worker.e2e.model import load_preset

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU path; a CUDA host runs the graph path")
LAYERS = load_preset(PROFILES["cpu"].preset)["layers"]
GRID = PROFILES["cpu"].grid  # batches 1 and 3 x contexts 48 and 200

# exact, and plain torch so the test needs no interpreter: the masked top-k the default computes
EXACT = """
import torch
PARAMS = {}
def forward(logits, lengths, k):
    n = logits.shape[1]
    masked = logits.masked_fill(torch.arange(n)[None, :] >= lengths.long()[:, None], float("-inf"))
    values, indices = torch.topk(masked, min(k, n), dim=1)
    indices = indices.to(torch.int32).masked_fill(values == float("-inf"), -1)
    pad = torch.full((logits.shape[0], k - indices.shape[1]), -1, dtype=torch.int32)
    return torch.cat([indices, pad], dim=1)
"""
# wrong on purpose: the first k positions, not the k largest
FIRST_K = """
import torch
PARAMS = {}
def forward(logits, lengths, k):
    return torch.arange(k, dtype=torch.int32).repeat(logits.shape[0], 1)
"""
ONE_ROW_SHORT = [{"bounds": {"rows": [1, 2], "n_ctx": [0, 100]}, "kernel": "candidate"}]


def _gate(source, routes):
    return run_gate(target="dsa_topk", candidate_source=source, incumbent_source=None, profile="cpu", routes=routes)


def _hits(point_or_stage) -> dict:
    return {row["route"]: row["calls"] for row in point_or_stage["route_hits"]}


def test_a_box_route_set_serves_the_candidate_in_its_box_and_the_default_elsewhere_and_counts_both():
    result = _gate(EXACT, ONE_ROW_SHORT)
    assert result["mode"] == "cpu-eager" and result["status"] == "unavailable", result.get("reason")
    by_point = {(p["batch"], p["context"]): p for p in result["points"]}
    assert set(by_point) == set(GRID)
    assert _hits(by_point[(1, 48)]) == {0: LAYERS, None: 0}
    for key in ((3, 48), (1, 200), (3, 200)):
        assert _hits(by_point[key]) == {0: 0, None: LAYERS}, key
    for p in result["points"]:
        assert p["parity"]["ok"] and p["kernel_ran"] and p["ratio"] is None
    route, fallback = result["route_hits"]
    assert route == {"route": 0, "bounds": {"rows": [1, 2], "n_ctx": [0, 100]}, "kernel": "candidate", "calls": LAYERS}
    assert fallback == {"route": None, "bounds": None, "kernel": "default", "calls": 3 * LAYERS}
    stage = contract.E2EStage.from_dict(dict(result, seconds=0.0))  # the fields are declared
    assert stage.route_hits == result["route_hits"] and stage.points[0].route_hits is not None


def test_the_routing_is_real_a_wrong_candidate_fails_parity_only_where_its_route_sends_calls():
    result = _gate(FIRST_K, ONE_ROW_SHORT)
    parity = {(p["batch"], p["context"]): p["parity"]["ok"] for p in result["points"]}
    assert parity == {(1, 48): False, (3, 48): True, (1, 200): True, (3, 200): True}
    assert result["status"] == "fail"


def test_one_axis_ranges_route_by_context_for_every_batch():
    result = _gate(EXACT, [{"lo": 0, "hi": 100, "kernel": "candidate"}, {"lo": 100, "hi": None, "kernel": "default"}])
    hits = {(p["batch"], p["context"]): _hits(p) for p in result["points"]}
    assert hits[(1, 48)] == hits[(3, 48)] == {0: LAYERS, 1: 0, None: 0}
    assert hits[(1, 200)] == hits[(3, 200)] == {0: 0, 1: LAYERS, None: 0}
    assert [row["kernel"] for row in result["route_hits"]] == ["candidate", "default", "default"]


def test_without_a_route_set_the_candidate_serves_every_call_through_one_route():
    result = _gate(EXACT, None)
    assert result["status"] == "unavailable"
    assert _hits(result) == {0: LAYERS * len(GRID), None: 0}


@pytest.mark.parametrize("routes, says", [
    ([{"bounds": {"rows": [1, 2], "n_ctx": [0, 100]}, "kernel": "default"}], "no route serves the candidate"),
    (ONE_ROW_SHORT + [{"bounds": {"rows": [1, 4], "n_ctx": [50, 300]}, "kernel": "candidate"}], "overlap"),
    ([], "empty route set"),
])
def test_a_bad_route_set_is_an_error_of_the_run_not_a_finding_against_the_candidate(routes, says):
    result = _gate(EXACT, routes)
    assert result["status"] == "error" and says in result["reason"]
    assert result["findings"] == [] and result["points"] == []


def test_the_sandboxed_e2e_child_serves_the_specs_route_set_and_the_stage_records_it(tmp_path):
    """What the pipeline's e2e stage runs (child_run with the spec's e2e_routes as cfg routes): the route set
    reaches the gate, the stage says which one it served and passes the report contract."""
    from gpu_worker.pipeline import child_run

    path = tmp_path / "candidate.py"
    path.write_text(EXACT)
    sent = []

    class Out:
        def send(self, **message):
            sent.append(message)

    cfg = {"target": "dsa_topk", "device": "cpu", "mode": "e2e", "candidate_path": str(path),
           "incumbent_path": None, "profile": "cpu", "routes": ONE_ROW_SHORT}
    child_run.run(cfg, Out(), perf=None, active_threads=None)
    stage = next(m["stage"] for m in sent if m["type"] == "e2e")
    assert stage["routes"] == ONE_ROW_SHORT
    assert _hits(stage) == {0: LAYERS, None: 3 * LAYERS}
    assert contract.stage_from_dict("e2e", stage).routes == ONE_ROW_SHORT
