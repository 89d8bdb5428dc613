"""The benchmark stage's per-shape entries and summary, built from the bench child's messages.

Shared by the single-process pipeline (pipeline/evaluate.py) and the multi-process runner
(distributed/runner.py)."""

from __future__ import annotations

from . import stats

MIN_NOISE_DELTA = 0.02


def bench_results(messages: list[dict], target, ceil: dict | None, wall_s: float):
    """(findings, per-shape entries, summary, claimed GPU seconds) from the bench child's messages."""
    findings, per_shape = [], []
    ratio_samples, ratios, floors = [], [], []
    claimed_s = 0.0
    for m in sorted((m for m in messages if m.get("type") == "bench_shape"), key=lambda m: m["index"]):
        findings += [dict(f, shape_index=m["index"]) for f in m.get("findings", [])]
        k = m.get("kernels", {})
        if "candidate" not in k or "incumbent" not in k:
            per_shape.append({"shape": m["shape"], "status": "error"})
            continue
        entry = {"shape": m["shape"], "rounds": m.get("rounds"), "input_sets": m.get("input_sets")}
        for name, data in k.items():
            times = data["times_us"]
            claimed_s += sum(times) * 1e-6
            entry[name] = {"median_us": float(stats.np.median(times)), "ci95_us": stats.median_ci(times),
                           "host_us": data.get("host_us"), "stale_replays": data.get("stale_replays")}
        cand = k["candidate"]["times_us"]
        r = stats.paired_ratio(cand, k["incumbent"]["times_us"])
        aa = stats.paired_ratio(k["incumbent"]["times_us"], k["incumbent_aa"]["times_us"], seed=1)
        noise = max(abs(aa["ci95"][0] - 1), abs(aa["ci95"][1] - 1))
        med = entry["candidate"]["median_us"]
        roof = stats.roofline(target.bytes_min(m["shape"]), target.flops(m["shape"]), med, ceil)
        default_med = entry.get("default", entry["incumbent"])["median_us"]
        entry.update(ratio=r["ratio"], ratio_ci95=r["ci95"], noise_aa=noise, aa_ratio=aa["ratio"],
                     delta=max(MIN_NOISE_DELTA, 2 * noise), default_median_us=default_med,
                     faster=r["ci95"][1] < 1 - max(MIN_NOISE_DELTA, 2 * noise), **roof)
        host = k["candidate"].get("host_us")
        if host and host > 3 * med + 50:  # host-timed replays far slower than the events claim
            findings.append({"code": "bench:timing_mismatch", "shape_index": m["index"],
                             "message": f"host wall time per replay {host:.1f} us vs event median {med:.1f} us"})
        ratio_samples.append(r["samples"])
        ratios.append(r["ratio"])
        floors.append(roof["floor_fraction"])
        per_shape.append(entry)
    if claimed_s > wall_s:
        findings.append({"code": "bench:timing_mismatch", "message": f"the child claims {claimed_s:.2f} s of GPU "
                         f"time in {wall_s:.2f} s of wall time"})
    for m in messages:
        if m.get("type") in ("fatal",) or (m.get("type") == "load" and m.get("status") == "fail"):
            findings += m.get("findings", []) or [{"code": m.get("code", "harness:fatal"), "message": m.get("message", "")}]
    return findings, per_shape, stats.summarize_shapes(ratio_samples, ratios, floors), claimed_s
