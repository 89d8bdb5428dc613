"""Bootstrap intervals and rooflines from raw times (no GPU needed: they are numbers)."""

import numpy as np

from gpu_worker.pipeline import stats


def test_ratio_of_means_interval_covers_the_true_ratio_and_excludes_one_when_clearly_faster():
    rng = np.random.default_rng(7)
    inc = 100 + rng.normal(0, 2, 50)
    cand = 80 + rng.normal(0, 2, 50)
    r = stats.paired_mean_ratio(cand.tolist(), inc.tolist())
    lo, hi = r["ci95"]
    assert lo <= 0.8 <= hi < 0.9
    same = stats.paired_mean_ratio(inc.tolist(), (100 + rng.normal(0, 2, 50)).tolist())
    assert same["ci95"][0] < 1.0 < same["ci95"][1]


def test_roofline_uses_the_measured_h200_ceilings():
    ceil = stats.ceilings_for("h200")
    r = stats.roofline(4_250_000, 0, 2.0, ceil)  # 4.25 MB at 4.25 TB/s = 1 us floor
    assert abs(r["floor_us"] - 1.0) < 1e-9 and abs(r["floor_fraction"] - 0.5) < 1e-9 and r["bound"] == "memory"
    assert abs(r["gb_per_s"] - 2125.0) < 1e-6
    c = stats.roofline(1000, 700e6, 2.0, ceil)
    assert c["bound"] == "compute" and abs(c["floor_us"] - 1.0) < 1e-9
    assert stats.roofline(1000, 0, 1.0, stats.ceilings_for("b300"))["floor_fraction"] is None


def test_geomean_speedup_is_incumbent_over_candidate():
    rng = np.random.default_rng(0)
    samples, ratios = [], []
    for true in (0.5, 2.0):
        inc = 100 + rng.normal(0, 1, 40)
        r = stats.paired_mean_ratio((inc * true).tolist(), inc.tolist())
        samples.append(r["samples"])
        ratios.append(r["ratio"])
    s = stats.summarize_shapes(samples, ratios, [0.5, 0.5])
    assert abs(s["geomean_speedup"] - 1.0) < 1e-6 and s["geomean_ci95"][0] <= 1.0 <= s["geomean_ci95"][1]


def test_kernel_stats_show_the_tail_that_a_median_hides():
    times = [10.0] * 95 + [100.0] * 5  # one call in twenty is ten times slower
    k = stats.kernel_stats(times)
    assert k["median_us"] == 10.0 and abs(k["mean_us"] - 14.5) < 1e-9
    assert k["p99_us"] == 100.0 and k["max_us"] == 100.0 and abs(k["slow_fraction"] - 0.05) < 1e-9
    assert k["mean_ci95_us"][0] < 14.5 < k["mean_ci95_us"][1] and k["calls"] == 100


def test_tail_ratio_compares_p99s_paired_by_input_set():
    inc = [10.0] * 100
    cand = [9.0] * 90 + [40.0] * 10  # faster in the middle, four times slower in the tail
    r = stats.paired_mean_ratio(cand, inc)
    assert abs(r["ratio"] - 1.21) < 1e-9 and abs(r["tail_ratio"] - 4.0) < 1e-9
    assert r["tail_ci95"][0] > 1.0


def test_family_means_name_the_family_a_tail_comes_from():
    families = ["normal", "ties"] * 50
    times = [10.0 if f == "normal" else 50.0 for f in families]
    assert stats.family_means(times, families) == {"normal": 10.0, "ties": 50.0}
    assert stats.family_means(times, None) is None
