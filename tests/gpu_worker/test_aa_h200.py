"""bench/aa_h200.py's counting: the rate intervals, the split of one bench child's shapes into A/A
evaluations, and the summary's calls on reports whose keep-rule outcome is known."""

import importlib.util
import math
from pathlib import Path

import pytest

from gpu_worker.targets import get_target

_spec = importlib.util.spec_from_file_location("aa_h200", Path(__file__).resolve().parents[2] / "bench" / "aa_h200.py")
aa = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(aa)

SHAPES = get_target("dsa_topk").benchmark_shapes("smoke")


def test_intervals_match_the_tables():
    # Clopper-Pearson: closed forms at k = 0 and k = n, and the tabulated 1 of 10
    assert aa.clopper_pearson(0, 100) == pytest.approx([0.0, 1 - 0.025 ** (1 / 100)], abs=1e-9)
    assert aa.clopper_pearson(100, 100) == pytest.approx([0.025 ** (1 / 100), 1.0], abs=1e-9)
    assert aa.clopper_pearson(1, 10) == pytest.approx([0.00253, 0.44502], abs=1e-5)
    assert aa.wilson(1, 10) == pytest.approx([0.01788, 0.40415], abs=1e-5)
    r = aa.rate(3, 250)
    assert r["rate"] == pytest.approx(0.012) and r["count"] == 3 and r["of"] == 250
    assert r["wilson95"][0] < 0.012 < r["wilson95"][1]


def _shape(shape, lo, hi, aa_half=0.005):
    mid = (lo + hi) / 2
    return {"shape": shape, "held_out": False, "input_sets": 64, "ratio": mid, "ratio_ci95": [lo, hi],
            "ratio_of": "mean", "tail_ratio": mid, "tail_ratio_ci95": [lo - 0.01, hi + 0.01], "aa_ratio": 1.0,
            "aa_ci95": [1 - aa_half, 1 + aa_half], "noise_aa": aa_half}


def _report(n, intervals, verify=None, bench_status="pass", findings=()):
    shapes = [_shape(s, lo, hi) for s, (lo, hi) in zip(SHAPES, intervals)]
    ratio = math.exp(sum(math.log(s["ratio"]) for s in shapes) / len(shapes))
    lo = math.exp(sum(math.log(s["ratio_ci95"][0]) for s in shapes) / len(shapes))
    hi = math.exp(sum(math.log(s["ratio_ci95"][1]) for s in shapes) / len(shapes))
    return {"schema": "ark.report/2", "candidate_id": f"aa-{n}", "target": "dsa_topk", "profile": "smoke",
            "stages": {"guard": {"status": "pass", "findings": []},
                       "verify": verify or {"status": "skipped", "reason": aa.SKIP_NOTE},
                       "benchmark": {"status": bench_status, "shapes": shapes, "findings": list(findings)},
                       "e2e": {"status": "skipped", "reason": "A/A"}},
            "summary": {"geomean_speedup": 1 / ratio, "geomean_ci95": [1 / hi, 1 / lo]},
            "verdict": {"status": "pass"}}


NOISE = [(0.99, 1.012), (0.995, 1.004)]
FASTER_BOTH = [(0.90, 0.92), (0.91, 0.93)]   # both shapes and the aggregate below 1 - 2%


def test_summary_counts_the_keep_rules_calls():
    reports = [_report(i, NOISE) for i in range(17)]
    reports += [_report(17, FASTER_BOTH), _report(18, FASTER_BOTH)]
    reports += [_report(19, [(0.90, 0.92), (1.0, 1.02)])]  # one shape faster alone
    # a child that crashed: its evaluations are no A/A comparison, neither faster nor not
    reports += [_report(20, NOISE, bench_status="fail", findings=[{"code": "benchmark:crash", "message": "died"}])]
    s = aa.summarize(reports)
    assert s["evaluations"] == 21 and s["judged"] == 20
    assert [x["candidate_id"] for x in s["excluded"]] == ["aa-20"]
    judged = {e["candidate_id"]: e for e in s["evaluations_detail"]}
    assert judged["aa-17"]["kept"] and judged["aa-18"]["kept"] and judged["aa-17"]["reason_code"] == "faster"
    assert not any(judged[f"aa-{i}"]["kept"] for i in range(17))
    kept = 2 + judged["aa-19"]["kept"]  # aa-19 may be kept for a region it wins; counted either way
    assert s["false_faster"]["count"] == kept and s["false_faster"]["of"] == 20
    assert s["false_faster"]["rate"] == pytest.approx(kept / 20)
    assert s["false_faster"]["clopper_pearson95"] == pytest.approx(aa.clopper_pearson(kept, 20))
    assert s["evaluations_with_a_shape_called_faster"]["count"] == 3
    # shapes judged alone: 2 + 2 + 1 faster of 40
    assert s["shape_false_faster"]["count"] == 5 and s["shape_false_faster"]["of"] == 40
    first, second = (aa.shape_label(x) for x in SHAPES)
    assert s["per_shape"][first]["faster"] == 3 and s["per_shape"][first]["n"] == 20
    assert s["per_shape"][second]["faster"] == 2 and s["per_shape"][second]["noise"] == 18


def test_only_the_aa_skip_is_read_as_verified():
    passed = aa.judge_report(_report(0, FASTER_BOTH))
    assert passed["verdict"] == "keep"
    other = aa.judge_report(_report(1, FASTER_BOTH, verify={"status": "skipped", "reason": "guard failed"}))
    assert other["verdict"] == "revert" and not other["kept"]
    failed = aa.judge_report(_report(2, FASTER_BOTH, verify={"status": "fail", "shapes": [], "findings": []}))
    assert failed["verdict"] == "revert" and failed["reason_code"] == "incorrect"


def test_group_messages_split_one_child_into_evaluations():
    per, groups = 2, 3
    msgs = [{"type": "warm", "seconds": 1.0}]
    msgs += [{"type": "bench_shape", "index": i, "shape": {"i": i},
              "findings": [{"code": "bench:x", "shape_index": i}] if i == 3 else []} for i in range(per * groups + 2)]
    msgs.append({"type": "done"})
    grouped, held = aa.group_messages(msgs, per, groups)
    assert [[m["shape"]["i"] for m in g] for g in grouped] == [[0, 1], [2, 3], [4, 5]]
    assert [[m["index"] for m in g] for g in grouped] == [[0, 1]] * 3
    assert grouped[1][1]["findings"] == [{"code": "bench:x", "shape_index": 1}]
    assert [m["shape"]["i"] for m in held] == [6, 7]
