"""Policy and range analysis on real H200 measurements (bench/results/h200): dsa_topk/best is
faster than torch.topk at every benchmarked shape, but the e2e gate measured it slower at batch 32
from 32K context and at batch 8 at 128K; so the policy reverts it, and range analysis gives it
only the contexts below the crossover."""

import pytest

from loop.policy import RunPolicy, decide
from loop.ranges import analyze
from tests.loop.reports import h200_topk_report

REPORT = h200_topk_report()
pytestmark = pytest.mark.skipif(REPORT is None, reason="no H200 measurements under bench/results/h200")


def test_the_real_kernel_win_is_beyond_noise_in_isolation():
    speedups = [1 / s["ratio"] for s in REPORT["stages"]["benchmark"]["shapes"]]
    assert all(s > 1.0 for s in speedups)
    assert REPORT["summary"]["geomean_speedup"] > 1.2


def test_the_policy_reverts_it_for_the_measured_end_to_end_losses():
    outcome = decide(REPORT, RunPolicy())
    assert outcome.reason_code == "e2e_regression"
    assert "batch 32 context 32768" in outcome.reason_text and "batch 8 context 131072" in outcome.reason_text
    assert "batch 1 context" not in outcome.reason_text


def test_range_analysis_routes_it_only_below_the_measured_crossover():
    analysis = analyze(REPORT, axis="n_ctx", policy=RunPolicy(), baseline="default")
    assert [(p.value, p.status) for p in analysis.points] == [
        (8192, "win"),  # e2e: faster at every batch
        (32768, "lose"), (131072, "lose"),  # e2e: slower at batch 32 (and 8 at 128K)
        (262144, "lose"),  # kernel-only win beyond the e2e grid, whose largest context lost
    ]
    (crossover,) = analysis.crossovers
    assert crossover["between"] == [8192, 32768]
    # e2e time ratios 1/1.052 at 8K and 1/0.917 at 32K cross 1 at about 13K
    assert 12000 < crossover["at"] < 15000
    assert list(analysis.routes) == [{"lo": 0, "hi": crossover["at"], "kernel": "candidate"},
                                     {"lo": crossover["at"], "hi": None, "kernel": "default"}]
