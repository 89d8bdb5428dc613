"""The report contract (gpu_worker/contract.py): stored /1 reports convert without invented numbers,
every report survives to_json -> JSON text -> from_json unchanged, and undeclared fields are refused."""

import json
from pathlib import Path

import pytest

from gpu_worker import contract
from gpu_worker.contract import ContractError, EvaluationSpec, Report, from_json, to_json

ROOT = Path(__file__).resolve().parents[2]
STORED = sorted((ROOT / "bench" / "results" / "h200" / "reports").glob("*.json"))


def test_there_are_stored_reports_to_read():
    assert len(STORED) >= 3


@pytest.mark.parametrize("path", STORED, ids=lambda p: p.name)
def test_a_stored_v1_report_converts_writes_and_reads_back_the_same(path):
    old = json.loads(path.read_text())
    assert old["schema"] == contract.SCHEMA_V1
    report = from_json(old)
    written = to_json(report)
    assert written["schema"] == contract.SCHEMA
    again = from_json(json.dumps(written))
    assert again == report
    assert to_json(again) == written
    # what /1 measured is kept as it was measured
    for before, after in zip(old["stages"]["benchmark"]["shapes"], report.stages.benchmark.shapes):
        assert after.ratio == before["ratio"] and after.ratio_ci95 == before["ratio_ci95"]
        assert after.ratio_of == "median"
        if before.get("aa_ci95") is None and before.get("noise_aa") is not None:  # the reach stands for both ends
            assert after.aa_ci95 == [1.0 - abs(before["noise_aa"]), 1.0 + abs(before["noise_aa"])]
        assert after.candidate.median_us == before["candidate"]["median_us"]
        assert after.candidate.ci95_us == before["candidate"]["ci95_us"]
        # and what it did not measure is not made up
        assert after.candidate.mean_us is None and after.candidate.p99_us is None
        assert after.candidate.slow_fraction is None and after.tail_ratio is None
    for before, after in zip(old["stages"]["verify"]["shapes"], report.stages.verify.shapes):
        assert after.passed == before["pass"]
    assert report.summary.geomean_speedup == old["summary"]["geomean_speedup"]
    assert report.summary.held_out_geomean is None


def test_converted_e2e_points_keep_their_intervals_and_lose_the_gpu_side_verdict():
    path = ROOT / "bench" / "results" / "h200" / "reports" / "dsa_topk__best.json"
    old = json.loads(path.read_text())
    points = from_json(old).stages.e2e.points
    assert points and len(points) == len(old["stages"]["e2e"]["points"])
    for before, after in zip(old["stages"]["e2e"]["points"], points):
        assert after.ratio_ci95 == before["ci95"] and after.aa_ci95 == before["aa_ci95"]
        assert before["verdict"] and "verdict" not in after.to_dict() and "noise" not in after.to_dict()


def test_an_unknown_field_is_refused_by_name_wherever_it_is():
    old = json.loads(STORED[0].read_text())
    report = to_json(from_json(old))
    report["stages"]["benchmark"]["shapes"][0]["candidate"]["mean_us_typo"] = 1.0
    with pytest.raises(ContractError, match="mean_us_typo"):
        from_json(report)
    with pytest.raises(ContractError, match="ratio_ci"):
        contract.BenchShape.from_dict({"shape": {}, "ratio_ci": [1, 2]})


def test_a_v2_report_must_say_it_is_v2():
    with pytest.raises(ContractError, match="schema"):
        Report(candidate_id=1, target="t", schema="ark.report/9")


def test_a_stage_status_outside_the_list_is_refused():
    with pytest.raises(ContractError, match="status"):
        contract.GuardStage(status="ok")


def test_non_finite_numbers_are_written_as_not_measured():
    report = Report(candidate_id=1, target="t", wall_s=float("nan"))
    assert to_json(report)["wall_s"] is None


def test_the_spec_refuses_unknown_fields_and_bad_profiles():
    spec = EvaluationSpec.from_dict({"candidate_id": 3, "target": "dsa_topk", "source": "x = 1", "attempt": 2})
    assert spec.attempt == 2 and spec.e2e is True and spec.seed is None
    with pytest.raises(ContractError, match="incumbent_src"):
        EvaluationSpec.from_dict({"candidate_id": 3, "target": "t", "source": "", "incumbent_src": ""})
    with pytest.raises(ContractError, match="profile"):
        EvaluationSpec(candidate_id=3, target="t", source="", profile="fast")


SEED = ROOT / "gpu_worker" / "candidates" / "add_rmsnorm" / "seed.py"
# a candidate the guard passes and whose import fails in the verify child: the verify stage runs and fails
FAILS_ON_IMPORT = SEED.read_text().replace("import triton\n", "import triton\nraise RuntimeError('boom')\n", 1)


@pytest.mark.parametrize("source, stage", [("def forward(:\n", "guard"), (FAILS_ON_IMPORT, "verify")],
                         ids=["guard_fails", "verify_runs"])
def test_a_report_built_by_the_pipeline_on_cpu_round_trips(source, stage, monkeypatch):
    from gpu_worker.pipeline import evaluate

    assert "boom" in FAILS_ON_IMPORT
    monkeypatch.setenv("ARK_DEVICE", "cpu")
    written = evaluate({"candidate_id": "rt", "target": "add_rmsnorm", "source": source, "seed": 11})
    assert written["schema"] == contract.SCHEMA and written["mode"] == "cpu"
    assert written["stages"][stage]["status"] == "fail" and written["verdict"]["status"] == "fail"
    report = from_json(json.dumps(written))
    assert to_json(report) == written
    assert report.stage(stage).findings and report.verdict.reasons == [f.code for f in report.stage(stage).findings]


def test_a_counter_ncu_did_not_give_reads_unknown_never_zero():
    from gpu_worker.contract import ncu_kernel_text
    k = {"name": "_kb_filter", "launches": 1, "us": 73.04, "dram_pct": 58.2, "sm_pct": None, "occupancy_pct": 46.0,
         "l2_hit_pct": None, "registers": None}
    assert ncu_kernel_text(k) == ("_kb_filter x1 73.0 us, DRAM 58% of peak, SM ?, occupancy 46%, L2 hits ?, "
                                  "? registers")
    assert ncu_kernel_text(dict(k, sm_pct=0.0, registers=64)).endswith("SM 0%, occupancy 46%, L2 hits ?, 64 registers")
