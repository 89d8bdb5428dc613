"""The keep/revert policy on reports (pure functions; no database)."""

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from loop import policy
from loop.keep import decide
from loop.policy import RunPolicy
from tests.loop.reports import cpu_report, crossover_report, e2e_point, report, shape_result

POLICY = RunPolicy()


def test_it_keeps_a_correct_candidate_faster_beyond_noise_everywhere():
    outcome = decide(report(), POLICY)
    assert (outcome.verdict, outcome.reason_code) == ("keep", "faster")
    assert outcome.numbers["ratio_ci95"][1] < 1 - outcome.numbers["delta"]


def test_it_reverts_a_guard_finding_with_the_finding_code():
    finding = {"code": "guard:thread", "message": "import of 'threading' is not allowed", "line": 3}
    outcome = decide(report(guard=[finding]), POLICY)
    assert (outcome.verdict, outcome.reason_code) == ("revert", "guard:thread")
    assert "line 3" in outcome.reason_text


def test_a_guard_code_is_not_prefixed_twice():
    finding = {"code": "thread", "message": "threading", "line": 3}
    assert decide(report(guard=[finding]), POLICY).reason_code == "guard:thread"


def test_it_reverts_an_incorrect_candidate_even_when_faster():
    bad = report(verify_status="fail", verify_shapes=[{"shape": {"rows": 5, "n_ctx": 2500}, "pass": False,
                                                       "max_error": 3.0}])
    outcome = decide(bad, POLICY)
    assert (outcome.verdict, outcome.reason_code) == ("revert", "incorrect")
    assert "n_ctx=2500" in outcome.reason_text


def test_one_failing_verification_shape_is_enough_to_revert():
    shapes = [{"shape": {"n_ctx": 4096}, "pass": True}, {"shape": {"n_ctx": 262144}, "pass": False}]
    assert decide(report(verify_shapes=shapes), POLICY).reason_code == "incorrect"


def test_it_reverts_a_slower_candidate():
    slow = report(shapes=[shape_result(4, 32768, 1.10), shape_result(64, 131072, 1.05)])
    assert decide(slow, POLICY).reason_code == "slower"


def test_a_candidate_equal_to_the_incumbent_is_noise_not_slower():
    # An A/A pair on the H200 (bench/results/h200/2026-12-05): ratio a hair above 1 but inside the floor. It was
    # called "slower" on the point estimate alone (124 of 335 A/A evaluations); the one rule says noise.
    even = report(shapes=[shape_result(4, 32768, 1.004, ci=0.01), shape_result(64, 131072, 1.002, ci=0.01)])
    outcome = decide(even, POLICY)
    assert (outcome.verdict, outcome.reason_code) == ("revert", "noise")
    beyond = report(shapes=[shape_result(4, 32768, 1.04, ci=0.01), shape_result(64, 131072, 1.04, ci=0.01)])
    assert decide(beyond, POLICY).reason_code == "slower"


def test_it_reverts_a_win_whose_interval_reaches_the_threshold_as_noise():
    # 3% faster but the interval's upper bound 0.99 is not below 1 - 2%
    close = report(shapes=[shape_result(4, 32768, 0.97, ci=0.02), shape_result(64, 131072, 0.97, ci=0.02)])
    assert decide(close, POLICY).reason_code == "noise"


def test_the_noise_floor_is_twice_the_aa_spread_when_that_exceeds_the_threshold():
    # 10% faster with a tight interval, but the kernel's A/A spread is 6%: delta = 12%
    noisy = report(shapes=[shape_result(4, 32768, 0.90, noise=0.06), shape_result(64, 131072, 0.90, noise=0.06)])
    outcome = decide(noisy, POLICY)
    assert outcome.reason_code == "noise"
    assert abs(outcome.numbers["delta"] - 0.12) < 1e-9
    quiet = report(shapes=[shape_result(4, 32768, 0.90, noise=0.01), shape_result(64, 131072, 0.90, noise=0.01)])
    assert decide(quiet, POLICY).verdict == "keep"


def test_the_runs_threshold_raises_the_bar():
    assert decide(report(), RunPolicy(threshold=0.25)).reason_code == "noise"


def test_it_reverts_a_kernel_win_that_is_slower_end_to_end_everywhere_it_wins():
    points = [e2e_point(4, 32768, 0.92), e2e_point(64, 131072, 0.92)]
    outcome = decide(report(points=points), POLICY)
    assert outcome.reason_code == "e2e_regression"
    assert "context 131072" in outcome.reason_text


def test_a_candidate_slower_end_to_end_in_one_region_is_kept_for_the_other_with_the_reason_shown():
    outcome = decide(report(points=[e2e_point(64, 131072, 0.92)]), POLICY)
    assert (outcome.verdict, outcome.reason_code) == ("keep", "region")
    assert "1 of 2 cells" in outcome.reason_text
    assert "rows 64 x n_ctx 131072: slower end to end at batch 64, context 131072" in outcome.reason_text
    assert outcome.numbers["overall"] == "e2e_regression"


def test_a_candidate_slower_overall_but_faster_at_small_rows_is_kept_for_them():
    shapes = [shape_result(1, 4096, 0.6), shape_result(4, 32768, 0.6), shape_result(64, 131072, 7.0)]
    outcome = decide(report(shapes=shapes, points=[]), POLICY)
    assert (outcome.verdict, outcome.reason_code) == ("keep", "region")
    assert "2 of 3 cells" in outcome.reason_text and "Slower than the incumbent" in outcome.reason_text
    everywhere = [shape_result(1, 4096, 1.2), shape_result(64, 131072, 7.0)]
    assert decide(report(shapes=everywhere, points=[]), POLICY).reason_code == "slower"


def test_an_e2e_point_is_judged_by_the_same_rule_with_its_own_aa_interval_and_the_runs_policy():
    # tokens/s ratio 0.95 +- 0.01: as a time ratio about [1.042, 1.064]
    slower = e2e_point(8, 32768, 0.95, ci=0.01, noise=0.01)  # delta = max(2%, 2 x 1%) = 2%: beyond noise
    one_cell = [shape_result(8, 32768, 0.8)]
    assert decide(report(shapes=one_cell, points=[slower]), POLICY).reason_code == "e2e_regression"
    noisy = e2e_point(8, 32768, 0.95, ci=0.01, noise=0.03)  # delta = 2 x 3% = 6%: within noise
    assert decide(report(points=[noisy]), POLICY).verdict == "keep"
    assert decide(report(points=[slower]), RunPolicy(threshold=0.08)).verdict == "keep"  # the run's own bar
    within = e2e_point(8, 32768, 0.99, ci=0.01, noise=0.02)
    assert decide(report(points=[within]), POLICY).verdict == "keep"


def test_an_untimed_e2e_point_has_no_judgement_and_a_missing_aa_interval_is_an_error():
    from loop.policy import e2e_judgement
    assert e2e_judgement(dict(e2e_point(1, 48), ratio=None, ratio_ci95=None), POLICY) is None
    blind = dict(e2e_point(1, 4096, 0.8), aa_ci95=None)
    assert decide(report(points=[blind]), POLICY).verdict == "error"
    unmeasured_noise = report()
    unmeasured_noise["stages"]["benchmark"]["shapes"][0]["aa_ci95"] = None
    assert decide(unmeasured_noise, POLICY).verdict == "error"


def test_e2e_parity_failure_is_incorrect_and_a_missing_kernel_is_a_finding():
    mismatch = e2e_point(1, 4096)
    mismatch["parity"] = {"ok": False}
    assert decide(report(points=[mismatch], e2e_status="fail"), POLICY).reason_code == "incorrect"
    unseen = e2e_point(1, 4096)
    unseen["kernel_ran"] = False
    assert decide(report(points=[unseen], e2e_status="fail"), POLICY).reason_code == "guard:e2e:kernel_not_seen"
    graphs_off = report(e2e_status="fail")
    graphs_off["stages"]["e2e"]["findings"] = [{"code": "e2e:graphs_off", "message": "PARAMS name graph settings"}]
    assert decide(graphs_off, POLICY).reason_code == "guard:e2e:graphs_off"


def test_an_e2e_harness_fault_is_an_error_not_a_revert():
    faulty = report(e2e_status="fail")
    faulty["stages"]["e2e"]["findings"] = [{"code": "e2e:point_error", "message": "RuntimeError: CUDA OOM"}]
    assert decide(faulty, POLICY).verdict == "error"


def test_a_benchmark_finding_reverts_as_a_shortcut_and_a_harness_one_is_an_error():
    caught = report(benchmark_status="fail")
    caught["stages"]["benchmark"]["findings"] = [{"code": "bench:timing_mismatch", "message": "host 900 us"}]
    assert decide(caught, POLICY).reason_code == "guard:bench:timing_mismatch"
    caught["stages"]["benchmark"]["findings"] = [{"code": "harness:fatal", "message": "child died"}]
    assert decide(caught, POLICY).verdict == "error"


def test_a_compile_only_verification_is_unmeasured():
    cute = cpu_report(verify_status="pass")
    cute["stages"]["verify"]["status"] = "compile_only"
    assert decide(cute, POLICY).reason_code == "unmeasured"


def test_a_cpu_mode_report_never_keeps_and_says_timings_need_a_gpu():
    outcome = decide(cpu_report(), POLICY)
    assert (outcome.verdict, outcome.reason_code) == ("revert", "unmeasured")
    assert "timings need a GPU worker" in outcome.reason_text


def test_an_incorrect_cpu_mode_report_is_incorrect_not_unmeasured():
    assert decide(cpu_report(verify_status="fail"), POLICY).reason_code == "incorrect"


def test_a_harness_error_is_an_error():
    broken = {"schema": "ark.report/1", "candidate_id": 1, "attempt": 1, "stages": {},
              "verdict": {"status": "error", "reasons": ["error:harness"], "message": "ImportError"}}
    outcome = decide(broken, POLICY)
    assert (outcome.verdict, outcome.reason_code) == ("error", "error")
    assert "ImportError" in outcome.reason_text


def test_a_report_missing_what_the_decision_needs_is_an_error_not_a_crash():
    for mutate in (lambda r: r.pop("stages"), lambda r: r["stages"].pop("verify"),
                   lambda r: r["stages"]["benchmark"].pop("shapes") or r.pop("summary"),
                   lambda r: r["summary"].update(geomean_ci95="wide"), lambda r: r.update(schema="ark.report/0"),
                   lambda r: r["stages"]["e2e"].pop("points")):
        broken = report()
        mutate(broken)
        assert decide(broken, POLICY).verdict == "error"
    assert decide(None, POLICY).verdict == "error"
    assert decide("not json", POLICY).verdict == "error"


@hsettings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=20))
def test_no_report_shape_crashes_the_policy(garbage):
    base = report()
    base["stages"]["benchmark"]["shapes"][0]["ratio_ci95"] = garbage
    assert decide(base, POLICY).verdict in ("keep", "revert", "error")
    assert decide(garbage, POLICY).verdict in ("revert", "error")


def test_a_crossover_candidate_is_kept_on_its_geomean():
    assert decide(crossover_report(), POLICY).verdict == "keep"


def test_run_policy_rejects_nonsense():
    for bad in ({"threshold": 1.5}, {"plateau_k": 0}, {"floor_fraction_stop": 2}):
        with pytest.raises(ValueError):
            RunPolicy.from_json(bad)
    assert RunPolicy.from_json({"threshold": 0.05, "unknown": 1}).threshold == 0.05


def test_summary_numbers_and_gpu_seconds_read_the_report():
    numbers = policy.summary_numbers(report())
    assert numbers["geomean_speedup"] > 1.0 and numbers["floor_fraction"] == 0.3
    assert policy.summary_numbers(cpu_report())["geomean_speedup"] is None
    assert policy.gpu_seconds(report(seconds=30.0)) == 0.1 + 5.0 + 30.0 + 10.0
    assert policy.gpu_seconds({"stages": "nonsense"}) == 0.0


def test_one_rule_judges_an_interval_faster_slower_or_within_noise():
    from loop.policy import FASTER, SLOWER_BEYOND_NOISE, WITHIN_NOISE, judge
    assert judge((0.80, 0.97), delta=0.02) == FASTER
    assert judge((0.80, 0.98), delta=0.02) == WITHIN_NOISE           # the upper bound touches 1 - delta
    assert judge((1.03, 1.20), delta=0.02) == SLOWER_BEYOND_NOISE
    assert judge((0.99, 1.02), delta=0.02) == WITHIN_NOISE


def test_the_rule_takes_a_policy_or_a_floor_and_the_two_agree():
    from loop.policy import FASTER, WITHIN_NOISE, judge, noise_floor
    aa = [0.97, 1.01]  # floor 6% under the default policy
    for ci, expected in (([0.85, 0.93], FASTER), ([0.85, 0.95], WITHIN_NOISE)):
        assert judge(ci, aa, RunPolicy()) == judge(ci, delta=noise_floor(aa, RunPolicy())) == expected
    with pytest.raises(TypeError):
        judge([0.85, 0.93], aa, RunPolicy(), delta=0.02)  # two floors: which one decides is ambiguous
    with pytest.raises(TypeError):
        judge([0.85, 0.93])
    with pytest.raises(policy.ReportError):
        judge([0.93, 0.85], delta=0.02)  # an interval whose low is above its high is not judged


def test_the_noise_floor_is_the_threshold_or_the_multiplied_aa_reach_whichever_is_larger():
    from loop.policy import FASTER, WITHIN_NOISE, judge, noise_floor
    assert noise_floor([0.995, 1.004], RunPolicy()) == 0.02
    assert abs(noise_floor([0.97, 1.01], RunPolicy()) - 0.06) < 1e-12  # the reach below 1 counts too
    assert abs(noise_floor([0.99, 1.04], RunPolicy(noise_multiplier=3.0)) - 0.12) < 1e-12
    assert judge([0.85, 0.93], [0.99, 1.01], RunPolicy()) == FASTER
    assert judge([0.85, 0.93], [0.96, 1.04], RunPolicy()) == WITHIN_NOISE  # delta 8%: 0.93 is not below 0.92


def _with_tail(tail_ci):
    shapes = [dict(shape_result(4, 32768, 0.8), tail_ratio=tail_ci[0] + 0.01, tail_ratio_ci95=list(tail_ci)),
              shape_result(64, 131072, 0.85)]
    return report(shapes=shapes)


def test_a_p99_worse_than_the_incumbents_beyond_noise_blocks_keep_where_it_is():
    everywhere = report(shapes=[dict(s, tail_ratio=4.01, tail_ratio_ci95=[4.0, 6.0]) for s in _with_tail((4.0, 6.0))
                                ["stages"]["benchmark"]["shapes"]])
    outcome = decide(everywhere, RunPolicy())
    assert (outcome.verdict, outcome.reason_code) == ("revert", "bench:tail")
    assert "p99" in outcome.reason_text and "rows=" in outcome.reason_text
    one = decide(_with_tail((4.0, 6.0)), RunPolicy())  # the other cell's tail is fine: kept there
    assert (one.verdict, one.reason_code) == ("keep", "region") and "p99 slower beyond noise" in one.reason_text


def test_a_tail_within_noise_or_an_allowing_policy_keeps():
    assert decide(_with_tail((0.95, 1.01)), RunPolicy()).verdict == "keep"
    assert decide(_with_tail((4.0, 6.0)), RunPolicy(allow_tail_regression=True)).verdict == "keep"


def test_a_held_out_shapes_tail_is_reported_not_judged():
    shapes = [shape_result(4, 32768, 0.8), dict(shape_result(5, 50000, 0.8), held_out=True, tail_ratio=5.0,
                                                 tail_ratio_ci95=[4.0, 6.0])]
    assert decide(report(shapes=shapes), RunPolicy()).verdict == "keep"
