"""A promotion's effect against the config in force now, weighted by the workload profile, and the
tokens/s waterfall of the versions: identical re-promotion adds 0, a rollback steps down."""

import pytest

from loop.impact import promotion_impact, serving_waterfall
from loop.models import ServingConfig
from loop.regions import analyze_candidate_grid
from loop.services.deployments import deployment_promote, deployment_rollback
from loop.services.workloads import workload_profile_set
from tests.loop.reports import shape_result, report
from tests.loop.services.test_deployments import BEST, SEED, kept
from tests.loop.test_regions import served_report


@pytest.fixture(autouse=True)
def export_dir(settings, tmp_path):
    settings.SERVING_EXPORT_DIR = tmp_path / "serving"


def test_the_effect_is_against_what_serves_now_and_weighted_by_the_profile(make_run, live_worker, bob, dana):
    live_worker()
    run = make_run()
    candidate = kept(run, BEST, author=bob, the_report=served_report())
    grid = analyze_candidate_grid(candidate, baseline="default")
    fresh = promotion_impact(candidate, grid, None)
    changing = [c for c in fresh["cells"] if c["changes"]]
    assert len(changing) == 6 and all(c["now"] == "default" and c["ratio"] == pytest.approx(0.6) for c in changing)
    assert fresh["weighted_by"].startswith("equal weights") and fresh["time_ratio"] == pytest.approx((6 * 0.6 + 6) / 12)
    # nearly all traffic at 64 rows: the same promotion is worth little
    workload_profile_set(run.thesis.target, [({"rows": 64, "n_ctx": 131072}, 99), ({"rows": 1, "n_ctx": 4096}, 1)])
    weighted = promotion_impact(candidate, grid, None)
    assert weighted["weighted_by"] == "workload profile" and weighted["time_ratio"] == pytest.approx(0.01 * 0.6 + 0.99)
    # once it serves, promoting it again changes nothing against what serves now
    current = deployment_promote(actor=dana, candidate=candidate, routes=list(grid.routes))
    assert not any(c["changes"] for c in promotion_impact(candidate, grid, current)["cells"])


def test_a_cell_served_by_another_candidate_is_compared_with_its_own_report_and_says_so(make_run, live_worker, bob, dana):
    live_worker()
    run = make_run()
    first = kept(run, SEED, author=bob, the_report=served_report(small_ratio=0.8))
    deployment_promote(actor=dana, candidate=first, routes=list(analyze_candidate_grid(first).routes))
    second = kept(run, BEST, author=bob, the_report=served_report(small_ratio=0.4))
    grid = analyze_candidate_grid(second, baseline="default")
    effect = promotion_impact(second, grid, ServingConfig.objects.get())
    cell = next(c for c in effect["cells"] if c["shape"] == {"rows": 4, "n_ctx": 32768})
    assert cell["now"] == f"c{first.pk}" and cell["ratio"] == pytest.approx(0.5)
    assert cell["basis"].startswith("from separate reports")


def test_the_waterfall_steps_up_by_measured_gains_zero_for_a_repromotion_and_down_for_a_rollback(
        make_run, live_worker, bob, dana):
    live_worker()
    run = make_run()
    small = kept(run, SEED, author=bob, the_report=served_report(e2e_small=(1.04, 1.0)))
    big = kept(run, BEST, author=bob, the_report=served_report(e2e_small=(1.10, 1.08)))
    target = run.thesis.target
    deployment_promote(actor=dana, candidate=small, routes=list(analyze_candidate_grid(small).routes))
    deployment_promote(actor=dana, candidate=big, routes=list(analyze_candidate_grid(big).routes))
    deployment_promote(actor=dana, candidate=big, routes=list(analyze_candidate_grid(big).routes))
    deployment_rollback(actor=dana, target=target, hardware="h200", to_version=1)
    falls = serving_waterfall(target, "h200")
    assert falls["base"] == pytest.approx(1000.0) and falls["points"] == [[1, 4096], [4, 32768], [64, 131072]]
    gains = [round(s["gain"], 6) for s in falls["steps"]]
    # v1: +40 at batch 1 of 3 points; v2: +60 and +80 more; v3: identical, 0; v4: back to v1
    assert gains == [pytest.approx(40 / 3), pytest.approx(140 / 3), 0.0, pytest.approx(-140 / 3)]
    assert [s["level"] for s in falls["steps"]][-1] == pytest.approx(falls["steps"][0]["level"])


def test_a_version_whose_kernel_has_no_e2e_measurement_is_not_measured(make_run, live_worker, bob, dana):
    live_worker()
    run = make_run()
    measured = kept(run, BEST, author=bob, the_report=served_report())
    unmeasured = kept(run, SEED, author=bob, the_report=report(shapes=[shape_result(1, 4096, 0.5)], points=[]))
    deployment_promote(actor=dana, candidate=measured, routes=list(analyze_candidate_grid(measured).routes))
    deployment_promote(actor=dana, candidate=unmeasured, routes=list(analyze_candidate_grid(unmeasured).routes))
    steps = serving_waterfall(run.thesis.target, "h200")["steps"]
    assert steps[0]["measured"] and not steps[1]["measured"] and steps[1]["gain"] is None


def test_the_backlog_ranks_by_share_times_distance_and_marks_what_is_unknown(make_run, live_worker, bob, dana):
    from loop.impact import target_backlog
    from loop.models import Target

    live_worker()
    run = make_run()
    candidate = kept(run, BEST, author=bob, the_report=served_report())
    Target.objects.get_or_create(name="add_rmsnorm", defaults={"axes": {"tokens": [1, 16384]}})
    rows = {r["target"].name: r for r in target_backlog()}
    assert rows[run.thesis.target.name]["share"] is None and rows[run.thesis.target.name]["left"] is None
    # the report contract has no zero-cost run yet (docs/domain.md): a report that carries one is read
    evaluation = candidate.evaluations.get()
    for point in evaluation.report["stages"]["e2e"]["points"]:
        point["ceiling_tok_s"] = 1250.0  # the default's 1000 tokens/s: the kernel is 20% of the step
    evaluation.save(update_fields=["report"])
    rows = {r["target"].name: r for r in target_backlog()}
    topk = rows[run.thesis.target.name]
    assert topk["share"] == pytest.approx(0.2) and topk["distance"] == pytest.approx(0.7)  # floor_fraction 0.3
    assert topk["left"] == pytest.approx(0.14)
    assert rows["add_rmsnorm"]["left"] is None and rows["add_rmsnorm"]["distance"] is None
    assert [r["target"].name for r in target_backlog()][0] == run.thesis.target.name
    falls = serving_waterfall(run.thesis.target, "h200")
    assert falls["ceiling"] is None  # nothing promoted: no kernel's report is read
