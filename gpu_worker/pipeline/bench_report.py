"""The benchmark stage's per-shape entries and summary, built from the bench child's messages.

Shared by the single-process pipeline (pipeline/evaluate.py) and the multi-process runner
(distributed/runner.py). The GPU side measures and reports distributions and intervals; whether a
candidate is faster, slower or within noise is decided by loop/policy.py (docs/keep-rule.md), so no entry
here carries a verdict. Ratios are of means (what a serving engine pays), with paired bootstrap intervals
over the input sets; the tail ratio compares the 99th percentiles."""

from __future__ import annotations

from . import stats

KERNELS = ("candidate", "incumbent", "incumbent_aa", "default")


def bench_results(messages: list[dict], target, ceil: dict | None, wall_s: float):
    """(findings, per-shape entries, summary, claimed GPU seconds) from the bench child's messages."""
    findings, per_shape = [], []
    listed, held = ([], [], []), ([], [], [])  # (ratio bootstrap samples, ratios, floor fractions)
    claimed_s = 0.0
    for m in sorted((m for m in messages if m.get("type") == "bench_shape"), key=lambda m: m["index"]):
        findings += [dict(f, shape_index=m["index"]) for f in m.get("findings", [])]
        k = m.get("kernels", {})
        held_out = bool(m.get("held_out"))
        if "candidate" not in k or "incumbent" not in k:
            per_shape.append({"shape": m["shape"], "held_out": held_out, "status": "error"})
            continue
        entry = {"shape": m["shape"], "held_out": held_out, "rounds": m.get("rounds"),
                 "input_sets": m.get("input_sets")}
        block_s = 0.0
        for name in KERNELS:
            if name not in k:
                continue
            times = k[name]["times_us"]
            block_s += sum(times) * 1e-6
            entry[name] = dict(stats.kernel_stats(times), host_us=k[name].get("host_us"),
                               host_event_us=k[name].get("host_event_us"),
                               stale_replays=k[name].get("stale_replays"),
                               family_mean_us=stats.family_means(times, m.get("families")),
                               place_mean_us=stats.place_means(times, k[name].get("places")))
        claimed_s += block_s
        # one replay per event pair: the events of a shape's replay block cannot add up to more than the
        # block's wall time (calls batched or skipped between the timed pairs would make them)
        if m.get("timed_wall_s") is not None and block_s > m["timed_wall_s"]:
            findings.append({"code": "bench:timing_mismatch", "shape_index": m["index"],
                             "message": f"the events claim {block_s * 1e3:.2f} ms of replays in a block that took "
                                        f"{m['timed_wall_s'] * 1e3:.2f} ms of wall time"})
        cand, inc = k["candidate"]["times_us"], k["incumbent"]["times_us"]
        r = stats.paired_mean_ratio(cand, inc)
        aa = stats.paired_mean_ratio(inc, k["incumbent_aa"]["times_us"], seed=1) if "incumbent_aa" in k else None
        default = stats.paired_mean_ratio(cand, k["default"]["times_us"], seed=2) if "default" in k else None
        mean = entry["candidate"]["mean_us"]
        roof = stats.roofline(target.bytes_min(m["shape"]), target.flops(m["shape"]), mean, ceil)
        entry.update(ratio=r["ratio"], ratio_ci95=r["ci95"], ratio_of="mean",
                     tail_ratio=r["tail_ratio"], tail_ratio_ci95=r["tail_ci95"],
                     aa_ratio=aa["ratio"] if aa else None, aa_ci95=aa["ci95"] if aa else None,
                     # the A/A interval's widest distance from 1: the noise floor the policy scales
                     noise_aa=max(abs(aa["ci95"][0] - 1), abs(aa["ci95"][1] - 1)) if aa else 0.0,
                     default_ratio=default["ratio"] if default else None,
                     default_median_us=entry.get("default", entry["incumbent"])["median_us"],
                     default_mean_us=entry.get("default", entry["incumbent"])["mean_us"], **roof)
        # the host-timed replays carry their own events (older children's did not: then the last input
        # set's, which is what they replayed; input sets differ in cost, a slow family is no timing lie)
        host = k["candidate"].get("host_us")
        events = k["candidate"].get("host_event_us") or cand[-1]
        if host and stats.host_gap(host, events):
            findings.append({"code": "bench:timing_mismatch", "shape_index": m["index"],
                             "message": f"host wall time per replay {host:.1f} us vs {events:.1f} us by the events "
                                        "of the same replays"})
        if m.get("profile") is not None:
            entry["profile"] = m["profile"]
        into = held if held_out else listed
        into[0].append(r["samples"])
        into[1].append(r["ratio"])
        into[2].append(roof["floor_fraction"])
        per_shape.append(entry)
    if claimed_s > wall_s:
        findings.append({"code": "bench:timing_mismatch", "message": f"the child claims {claimed_s:.2f} s of GPU "
                         f"time in {wall_s:.2f} s of wall time"})
    for m in messages:
        if m.get("type") in ("fatal",) or (m.get("type") == "load" and m.get("status") == "fail"):
            findings += m.get("findings", []) or [{"code": m.get("code", "harness:fatal"), "message": m.get("message", "")}]
    summary = stats.summarize_shapes(*listed)
    summary["held_out_geomean"] = stats.summarize_shapes(*held)["geomean_speedup"]
    return findings, per_shape, summary, claimed_s
