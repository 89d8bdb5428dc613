"""Range analysis: where a kept candidate wins along n_ctx, its crossovers, and the routes."""

import pytest

from loop.policy import RunPolicy
from loop.ranges import analyze
from tests.loop.reports import crossover_report, e2e_point, report, shape_result


def test_a_candidate_that_wins_only_below_the_crossover_gets_a_route_for_that_range_alone():
    analysis = analyze(crossover_report(), axis="n_ctx")
    assert [p.status for p in analysis.points] == ["win", "win", "lose", "lose"]
    assert analysis.win_ranges == ((4096, 32768),)
    (crossover,) = analysis.crossovers
    assert crossover["between"] == [32768, 131072] and crossover["to"] == "default"
    # worst ratio 0.78 at 32K, 1.20 at 128K: ratio 1 is crossed at 2^(15 + 2 * 0.22/0.42), about 67K
    assert 60000 < crossover["at"] < 75000
    assert list(analysis.routes) == [
        {"lo": 0, "hi": crossover["at"], "kernel": "candidate"},
        {"lo": crossover["at"], "hi": None, "kernel": "default"},
    ]


def test_the_worst_shape_at_a_value_decides_it():
    shapes = [shape_result(1, 4096, 0.5), shape_result(128, 4096, 1.02), shape_result(1, 32768, 0.5)]
    analysis = analyze(report(shapes=shapes), axis="n_ctx")
    assert [(p.value, p.status) for p in analysis.points] == [(4096, "lose"), (32768, "win")]
    assert analysis.routes[0] == {"lo": 0, "hi": analysis.routes[1]["lo"], "kernel": "default"}
    assert analysis.routes[-1]["hi"] is None and analysis.routes[-1]["kernel"] == "candidate"
    assert 4096 < analysis.routes[1]["lo"] <= 32768


def test_a_tie_within_noise_is_not_a_win_and_its_value_stays_with_the_default():
    shapes = [shape_result(4, 4096, 0.7), shape_result(4, 32768, 0.99), shape_result(4, 131072, 0.7)]
    analysis = analyze(report(shapes=shapes), axis="n_ctx")
    assert [p.status for p in analysis.points] == ["win", "tie", "win"]
    # the ratio never crosses 1 between the values: the boundaries sit at the measured values
    assert list(analysis.routes) == [{"lo": 0, "hi": 32768, "kernel": "candidate"},
                                     {"lo": 32768, "hi": 131072, "kernel": "default"},
                                     {"lo": 131072, "hi": None, "kernel": "candidate"}]


def test_an_e2e_regression_at_a_context_removes_it_from_the_candidates_range():
    shapes = [shape_result(4, 4096, 0.7), shape_result(4, 32768, 0.7), shape_result(4, 131072, 0.7)]
    points = [e2e_point(1, 131072, 0.90)]
    analysis = analyze(report(shapes=shapes, points=points), axis="n_ctx")
    assert [p.status for p in analysis.points] == ["win", "win", "lose"]
    assert analysis.routes[0]["kernel"] == "candidate" and analysis.routes[0]["hi"] <= 131072


def test_a_candidate_that_wins_everywhere_takes_the_whole_axis():
    analysis = analyze(report(), axis="n_ctx")
    assert list(analysis.routes) == [{"lo": 0, "hi": None, "kernel": "candidate"}]
    assert analysis.crossovers == ()


def test_a_candidate_that_wins_nowhere_gets_no_route():
    analysis = analyze(report(shapes=[shape_result(4, 4096, 1.1)]), axis="n_ctx")
    assert list(analysis.routes) == [{"lo": 0, "hi": None, "kernel": "default"}]


def test_ratios_against_the_default_kernel_use_its_medians():
    # 0.8 of the incumbent, but the incumbent is 1.5x slower than default there: 1.2 of default
    shape = shape_result(4, 4096, 0.8, incumbent_us=150.0, default_us=100.0)
    assert analyze(report(shapes=[shape]), axis="n_ctx").points[0].status == "win"
    assert analyze(report(shapes=[shape]), axis="n_ctx", baseline="default").points[0].status == "lose"


def test_shapes_without_the_axis_are_refused():
    with pytest.raises(ValueError):
        analyze(report(), axis="batch")


def test_an_e2e_win_counts_where_no_benchmark_shape_was_measured():
    shapes = [shape_result(4, 32768, 0.7), shape_result(4, 131072, 1.2)]
    points = [e2e_point(1, 8192, 1.08), e2e_point(1, 8192, 1.0)]
    analysis = analyze(report(shapes=shapes, points=points), axis="n_ctx")
    assert [(p.value, p.status, p.sources) for p in analysis.points] == [
        (8192, "win", ("e2e",)), (32768, "win", ("benchmark",)), (131072, "lose", ("benchmark",))]


def test_a_kernel_only_win_above_an_e2e_loss_is_not_trusted_but_one_below_is():
    shapes = [shape_result(4, 4096, 0.7), shape_result(4, 65536, 0.7), shape_result(4, 262144, 0.7)]
    points = [e2e_point(32, 65536, 0.9)]
    analysis = analyze(report(shapes=shapes, points=points), axis="n_ctx")
    assert [(p.value, p.status) for p in analysis.points] == [(4096, "win"), (65536, "lose"), (262144, "lose")]
    assert analysis.routes[0]["kernel"] == "candidate" and analysis.routes[-1]["kernel"] == "default"


def test_the_range_analysis_judges_e2e_points_with_the_runs_own_policy():
    shapes = [shape_result(4, 4096, 0.7), shape_result(4, 131072, 0.7)]
    points = [e2e_point(1, 131072, 0.95)]  # about 5% slower end to end
    strict = analyze(report(shapes=shapes, points=points), axis="n_ctx")
    lenient = analyze(report(shapes=shapes, points=points), axis="n_ctx", policy=RunPolicy(threshold=0.1))
    assert [p.status for p in strict.points] == ["win", "lose"]
    assert [p.status for p in lenient.points] == ["win", "win"]  # within the run's 10% bar: no veto
