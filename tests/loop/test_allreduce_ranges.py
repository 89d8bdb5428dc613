"""Range analysis of an all-reduce latency curve along the message size (issue 9), on synthetic data.

The curve follows the shape in docs/figures.md (byte floors): a one-shot kernel at about 6.2 us for small messages
against NCCL's 18.1 us, each growing with the message at its own rate, crossing near 200 KB:
    one-shot(B) = 6.2 us + B / 14.7 KB/us,  NCCL(B) = 18.1 us + B / 100 KB/us.
Synthetic, not measured: the H200 pair has not run (docs/allreduce.md).
"""

import pytest

from gpu_worker.serving_config import ServingConfigError, parse_serving_config
from gpu_worker.distributed.serving import clamp_routes, serving_config
from gpu_worker.targets.allreduce import ALLREDUCE
from loop.ranges import analyze
from tests.loop.reports import report

ONE_SHOT_US, ONE_SHOT_BYTES_PER_US = 6.2, 14_683.0
NCCL_US, NCCL_BYTES_PER_US = 18.1, 100_000.0
KB, MB = 1024, 1024 * 1024
LINK_BYTES_PER_US = 450e3  # NVLink 4 per direction, spec sheet: only for the synthetic floor fraction


def one_shot_us(b):
    return ONE_SHOT_US + b / ONE_SHOT_BYTES_PER_US


def nccl_us(b):
    return NCCL_US + b / NCCL_BYTES_PER_US


def shape_entry(shape, *, rel_ci=0.02, noise=0.005):
    """One benchmark shape as evaluate.bench_results writes it: ratio = candidate / incumbent (NCCL)."""
    cand, inc = one_shot_us(shape["bytes"]), nccl_us(shape["bytes"])
    ratio = cand / inc
    return {"shape": dict(shape), "rounds": 50, "input_sets": 8,
            "candidate": {"median_us": cand, "ci95_us": [cand * 0.99, cand * 1.01]},
            "incumbent": {"median_us": inc, "ci95_us": [inc * 0.99, inc * 1.01]},
            "incumbent_aa": {"median_us": inc, "ci95_us": [inc * 0.99, inc * 1.01]},
            "default_median_us": inc, "ratio": ratio, "ratio_ci95": [ratio * (1 - rel_ci), ratio * (1 + rel_ci)],
            "aa_ratio": 1.0, "aa_ci95": [1.0 - noise, 1.0 + noise],
            "floor_fraction": ALLREDUCE.bytes_min(shape) / LINK_BYTES_PER_US / cand}


def curve_report(**kw):
    shapes = [shape_entry(s, **kw) for s in ALLREDUCE.benchmark_shapes("full")]
    return report(target="allreduce", shapes=shapes, points=[])


def test_the_one_shot_kernel_wins_below_the_crossover_and_nccl_above():
    analysis = analyze(curve_report(), axis="bytes")
    values = [p.value for p in analysis.points]
    assert values[0] == 1 * KB and values[-1] == 64 * MB and len(values) == 17
    statuses = {p.value: p.status for p in analysis.points}
    assert all(statuses[v] == "win" for v in values if v <= 128 * KB)
    assert all(statuses[v] == "lose" for v in values if v >= 256 * KB)
    assert analysis.win_ranges == ((1 * KB, 128 * KB),)
    (crossover,) = analysis.crossovers
    assert crossover["between"] == [128 * KB, 256 * KB] and crossover["to"] == "default"
    # the curves cross at 204800 bytes; the analysis interpolates the ratio linearly in log(bytes)
    assert 180 * KB < crossover["at"] < 220 * KB
    assert list(analysis.routes) == [{"lo": 0, "hi": crossover["at"], "kernel": "candidate"},
                                     {"lo": crossover["at"], "hi": None, "kernel": "default"}]


def test_the_serving_routes_give_the_candidate_only_1k_up_to_the_crossover():
    analysis = analyze(curve_report(), axis="bytes")
    at = analysis.crossovers[0]["at"]
    lo, hi = ALLREDUCE.axes["bytes"]
    assert clamp_routes(analysis.to_json()["routes"], lo, hi) == [
        {"lo": 0, "hi": 1 * KB, "kernel": "default"},  # below the measured range: never timed
        {"lo": 1 * KB, "hi": at, "kernel": "candidate"},
        {"lo": at, "hi": None, "kernel": "default"}]


def test_a_point_within_noise_is_a_tie_and_ends_the_candidates_range():
    # at 128 KB the ratio is 0.78: an interval of +-25% still ends below 1 - delta = 0.98 (a win),
    # one of +-30% reaches 1.01 (a tie: not a win, not slower); at 64 KB (0.57) both win
    wide = analyze(curve_report(rel_ci=0.25), axis="bytes")
    statuses = {p.value: p.status for p in wide.points}
    assert statuses[64 * KB] == "win" and statuses[128 * KB] == "win"
    wider = analyze(curve_report(rel_ci=0.30), axis="bytes")
    statuses = {p.value: p.status for p in wider.points}
    assert statuses[64 * KB] == "win" and statuses[128 * KB] == "tie"
    routes = clamp_routes(wider.to_json()["routes"], *ALLREDUCE.axes["bytes"])
    candidate = [r for r in routes if r["kernel"] == "candidate"]
    assert candidate == [{"lo": 1 * KB, "hi": 128 * KB, "kernel": "candidate"}]  # 128 KB itself stays with NCCL


def test_the_serving_config_is_refused_only_for_its_axis_until_dispatch_knows_bytes():
    analysis = analyze(curve_report(), axis="bytes")
    routes = clamp_routes(analysis.to_json()["routes"], *ALLREDUCE.axes["bytes"])
    config = serving_config(routes, target="allreduce", hardware="h200x2", version=1, candidate_id="seed",
                            source="def forward(x, comm):\n    return x\n")
    try:
        parsed = parse_serving_config(config, target="allreduce")
    except ServingConfigError as e:  # gpu_worker/serving_config.py: AXES = ("n_ctx",) (docs/allreduce.md)
        assert e.problems and all("'axis'" in p and "'bytes'" in p for p in e.problems), e.problems
    else:
        assert parsed.axis == "bytes" and [r.kernel is None for r in parsed.routes] == [True, False, True]


@pytest.mark.parametrize("value, kernel", [(512, "default"), (1 * KB, "candidate"), (150 * KB, "candidate"),
                                           (256 * KB, "default"), (64 * MB, "default")])
def test_each_message_size_goes_to_one_kernel(value, kernel):
    routes = clamp_routes(analyze(curve_report(), axis="bytes").to_json()["routes"], *ALLREDUCE.axes["bytes"])
    (hit,) = [r for r in routes if r["lo"] <= value and (r["hi"] is None or value < r["hi"])]
    assert hit["kernel"] == kernel
