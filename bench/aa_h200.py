"""Many A/A evaluations in one GPU call (issue 19): one kernel timed against itself by the benchmark stage,
each comparison judged by the keep rule, and the rate of false "faster" calls with its 95% interval.

    python bench/aa_h200.py run OUT_DIR [--target dsa_topk] [--kernel gpu_worker/candidates/dsa_topk/best.py]
                                        [--budget-s 330] [--first 40] [--max-evals 400]
    python bench/aa_h200.py run OUT_DIR --cpu 2     # the CPU check: fake graphs and events, no timing meaning
    python bench/aa_h200.py summarize OUT_DIR       # judge OUT_DIR/reports/*.json again -> OUT_DIR/summary.json

On the device tool (at most 8 files come back from $OUT, so the reports travel as one archive):
    set -o pipefail; PYTHONUNBUFFERED=1 python3 bench/aa_h200.py run $OUT/aa --budget-s 320 --first 30 2>&1 |
    tee $OUT/run.log; cp $OUT/aa/summary.json $OUT/; tar czf $OUT/reports.tgz -C $OUT/aa reports children.json
    && rm -rf $OUT/aa

What one A/A evaluation is here. A whole `python -m gpu_worker evaluate --candidate X --incumbent X` spends
most of its time re-verifying X and compiling X in a fresh bench child, so only one or two fit in a short GPU
lease. This script keeps the benchmark stage and the decision exactly as evaluate.py and loop/keep.py make them,
and drops the rest:
- the benchmark runs in the sandboxed bench child of gpu_worker/pipeline/evaluate.py (EarlyChild, the same
  child_cfg, the source written as candidate.py and as incumbent.py, the default kernel timed as well), with
  the smoke profile's shapes and input sets (gpu_worker/pipeline/bench_child.py: fresh inputs per set drawn
  from the secret seed after capture, rotating over every value family, L2 flush, graph replay, per-set
  output checks, the incumbent's A/A copy), and the parent's referee re-checks the saved replays;
- one child times G A/A evaluations: its shape list is the smoke shapes repeated G times. The child draws
  every input set of listed shape i from (seed, "bench", i, j) and captures each shape's graphs on inputs from
  (seed, "bench", i, "capture"), so the G groups have disjoint inputs: evaluation g's seed is (the child's
  secret seed, its shape indices). Each child has its own secret seed, as an evaluation has; the child's two
  held-out shapes are timed and judged per shape but belong to no group (the keep rule reads no held-out shape);
- verification is not run: the source is the incumbent, already verified (docs/benchmark.md, A/A). Each report
  says so in its verify stage (`skipped`); the keep rule, which reaches the benchmark only after a passing
  verify stage, is given a copy whose verify stage is marked passed with that note;
- each group becomes a report through the contract (gpu_worker/contract.py), judged by loop.keep.decide with
  the default RunPolicy: "kept" (verdict keep, reason faster or region) is a false "faster". Each listed shape
  is also judged alone by loop.policy.judge (its mean ratio's interval against its own A/A floor).
The sizes: the first child gets --first groups; the next ones as many as the measured time per group leaves in
--budget-s, until --max-evals.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import secrets
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SKIP_NOTE = ("A/A: not re-verified; the candidate and the incumbent are the same source, the already-verified "
             "incumbent (bench/aa_h200.py)")

# ---------------------------------------------------------------------- intervals of a binomial rate


def wilson(k: int, n: int, z: float = 1.959963984540054) -> list[float]:
    """Wilson score 95% interval of k successes in n trials."""
    if n <= 0:
        return [0.0, 1.0]
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return [max(0.0, mid - half), min(1.0, mid + half)]


def _binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k), X ~ Binomial(n, p), summed in log space (n up to thousands)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    if p <= 0:
        return 1.0
    if p >= 1:
        return 0.0
    lp, lq = math.log(p), math.log1p(-p)
    return min(1.0, sum(math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp
                                 + (n - i) * lq) for i in range(k + 1)))


def clopper_pearson(k: int, n: int, alpha: float = 0.05) -> list[float]:
    """Exact (Clopper-Pearson) 95% interval of k successes in n trials, by bisection on the binomial CDF."""
    if n <= 0:
        return [0.0, 1.0]

    def solve(f) -> float:  # f increasing in p, root in [0, 1]
        lo, hi = 0.0, 1.0
        for _ in range(100):
            mid = (lo + hi) / 2
            if f(mid) < 0:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2

    lower = 0.0 if k == 0 else solve(lambda p: (1 - _binom_cdf(k - 1, n, p)) - alpha / 2)
    upper = 1.0 if k == n else solve(lambda p: alpha / 2 - _binom_cdf(k, n, p))
    return [lower, upper]


def rate(k: int, n: int) -> dict:
    return {"count": k, "of": n, "rate": k / n if n else None, "wilson95": wilson(k, n),
            "clopper_pearson95": clopper_pearson(k, n)}


# ---------------------------------------------------------------------- judging reports (pure; no GPU)


def shape_label(shape: dict) -> str:
    keys = [k for k in shape if k not in ("values",)]
    return " ".join(f"{k}={shape[k]}" for k in keys)


def for_keep_rule(report: dict) -> dict:
    """The report as the keep rule is given it: the verify stage that was skipped for A/A only (SKIP_NOTE) is
    marked passed; nothing else changes."""
    verify = (report.get("stages") or {}).get("verify") or {}
    if verify.get("status") != "skipped" or verify.get("reason") != SKIP_NOTE:
        return report
    stages = dict(report["stages"], verify={"status": "pass", "shapes": [], "findings": [], "reason": SKIP_NOTE})
    return dict(report, stages=stages)


def judge_report(report: dict, policy=None) -> dict:
    """One A/A evaluation's calls: the keep rule's outcome and each listed shape's own call."""
    from loop.keep import decide
    from loop.policy import FASTER, KEEP, RunPolicy, aa_interval, judge

    policy = policy or RunPolicy()
    outcome = decide(for_keep_rule(report), policy)
    shapes = []
    for s in (report.get("stages", {}).get("benchmark") or {}).get("shapes") or []:
        if s.get("held_out") or not s.get("ratio_ci95"):
            continue
        shapes.append({"shape": shape_label(s["shape"]), "ratio": s["ratio"], "ratio_ci95": s["ratio_ci95"],
                       "aa_ci95": s.get("aa_ci95"), "call": judge(s["ratio_ci95"], aa_interval(s), policy),
                       "tail_call": judge(s["tail_ratio_ci95"], aa_interval(s), policy)
                       if s.get("tail_ratio_ci95") else None})
    bench = (report.get("stages") or {}).get("benchmark") or {}
    return {"candidate_id": report.get("candidate_id"), "benchmark_status": bench.get("status"),
            "benchmark_findings": [f.get("code") for f in bench.get("findings") or []], "verdict": outcome.verdict,
            "reason_code": outcome.reason_code, "reason": outcome.reason_text,
            "kept": outcome.verdict == KEEP, "called_faster": outcome.verdict == KEEP,
            "numbers": {k: v for k, v in outcome.numbers.items() if isinstance(v, (int, float, list, str))},
            "shapes": shapes, "any_shape_faster": any(s["call"] == FASTER for s in shapes)}


def summarize(reports: list[dict], held_out: list[dict] | None = None, policy=None) -> dict:
    """The A/A rate over evaluations (the keep rule's call) and over shapes (each shape's own call).
    `held_out`: the children's held-out shape entries, judged alone per shape."""
    from loop.policy import FASTER, SLOWER_BEYOND_NOISE, WITHIN_NOISE, RunPolicy, aa_interval, judge

    policy = policy or RunPolicy()
    evals = [judge_report(r, policy) for r in reports]
    # only a benchmark that passed is an A/A comparison: a crashed or failed child's evaluations are listed,
    # not counted as "not faster"
    judged = [e for e in evals if e["benchmark_status"] == "pass" and e["verdict"] != "error"]
    by_shape: dict[str, dict] = {}
    for e in judged:
        for s in e["shapes"]:
            d = by_shape.setdefault(s["shape"], {FASTER: 0, SLOWER_BEYOND_NOISE: 0, WITHIN_NOISE: 0, "n": 0,
                                                 "tail_faster": 0, "ratios": []})
            d[s["call"]] += 1
            d["n"] += 1
            d["tail_faster"] += s["tail_call"] == FASTER
            d["ratios"].append(s["ratio"])
    shapes_out = {}
    for label, d in by_shape.items():
        rs = sorted(d.pop("ratios"))
        shapes_out[label] = dict(d, faster_rate=rate(d[FASTER], d["n"]),
                                 ratio_min=rs[0], ratio_median=rs[len(rs) // 2], ratio_max=rs[-1])
    all_shapes = [s for e in judged for s in e["shapes"]]
    held = [{"shape": shape_label(s["shape"]), "ratio": s["ratio"], "ratio_ci95": s["ratio_ci95"],
             "aa_ci95": s.get("aa_ci95"), "call": judge(s["ratio_ci95"], aa_interval(s), policy)}
            for s in held_out or [] if s.get("ratio_ci95")]
    counted = {e["candidate_id"] for e in judged}
    copies = [s for r in reports if r.get("candidate_id") in counted
              for s in (r.get("stages", {}).get("benchmark") or {}).get("shapes") or [] if s.get("aa_ci95")]
    copy_calls = [judge(s["aa_ci95"], delta=policy.threshold) for s in copies]
    faster_evals = [e for e in judged if e["called_faster"]]
    return {
        "policy": policy.to_json(),
        "evaluations": len(evals),
        "judged": len(judged),
        "excluded": [{"candidate_id": e["candidate_id"], "benchmark_status": e["benchmark_status"],
                      "findings": e["benchmark_findings"], "reason": e["reason"]} for e in evals if e not in judged],
        "reason_codes": {c: sum(e["reason_code"] == c for e in evals) for c in sorted({e["reason_code"] for e in evals})},
        # the issue's figure: evaluations the keep rule would keep as faster (a false "faster")
        "false_faster": rate(len(faster_evals), len(judged)),
        "false_faster_evaluations": [{"candidate_id": e["candidate_id"], "reason": e["reason"]} for e in faster_evals],
        "evaluations_with_a_shape_called_faster": rate(sum(e["any_shape_faster"] for e in judged), len(judged)),
        "shape_false_faster": rate(sum(s["call"] == FASTER for s in all_shapes), len(all_shapes)),
        "shape_false_slower": rate(sum(s["call"] == SLOWER_BEYOND_NOISE for s in all_shapes), len(all_shapes)),
        "per_shape": shapes_out,
        "held_out_false_faster": rate(sum(h["call"] == FASTER for h in held), len(held)),
        "held_out": held,
        # the incumbent against its own copy, against the bare threshold (as bench/aa_rate.py counts it)
        "copy_faster_beyond_threshold": rate(sum(c == FASTER for c in copy_calls), len(copy_calls)),
        "evaluations_detail": evals,
    }


def summarize_dir(out: Path) -> dict:
    reports = [json.loads(p.read_text()) for p in sorted((out / "reports").glob("aa-*.json"))]
    children = json.loads((out / "children.json").read_text()) if (out / "children.json").exists() else []
    summary = summarize(reports, [s for c in children for s in c.get("held_out_shapes", [])])
    summary["children"] = [{k: v for k, v in c.items() if k != "held_out_shapes"} for c in children]
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def print_summary(s: dict) -> None:
    ff, sf = s["false_faster"], s["shape_false_faster"]
    print(f"A/A evaluations judged by the keep rule: {ff['of']} (excluded, benchmark not passed: {len(s['excluded'])}); "
          f"called faster (kept): {ff['count']} = {100 * (ff['rate'] or 0):.2f}%, "
          f"Wilson 95% [{100 * ff['wilson95'][0]:.2f}, {100 * ff['wilson95'][1]:.2f}]%, "
          f"Clopper-Pearson [{100 * ff['clopper_pearson95'][0]:.2f}, {100 * ff['clopper_pearson95'][1]:.2f}]%")
    print(f"reasons: {s['reason_codes']}")
    print(f"listed shapes judged alone: {sf['of']}, called faster: {sf['count']} = {100 * (sf['rate'] or 0):.2f}% "
          f"[{100 * sf['wilson95'][0]:.2f}, {100 * sf['wilson95'][1]:.2f}]%; called slower: "
          f"{s['shape_false_slower']['count']}")
    for label, d in s["per_shape"].items():
        print(f"  {label}: n={d['n']} faster={d['faster']} slower={d['slower']} noise={d['noise']} "
              f"tail-faster={d['tail_faster']} ratio min/median/max {d['ratio_min']:.4f}/{d['ratio_median']:.4f}/"
              f"{d['ratio_max']:.4f}")
    h = s["held_out_false_faster"]
    print(f"held-out shapes: {h['of']}, called faster: {h['count']}; incumbent vs copy beyond the threshold: "
          f"{s['copy_faster_beyond_threshold']['count']} of {s['copy_faster_beyond_threshold']['of']}")


# ---------------------------------------------------------------------- the GPU run


def group_messages(messages: list[dict], per_group: int, groups: int) -> tuple[list[list[dict]], list[dict]]:
    """The child's bench_shape messages split into its A/A groups (listed shapes g*per_group .. +per_group,
    renumbered from 0 as in a report of their own) and its held-out shapes."""
    listed = per_group * groups
    out: list[list[dict]] = [[] for _ in range(groups)]
    held = []
    for m in messages:
        if m.get("type") != "bench_shape":
            continue
        if m["index"] >= listed:
            held.append(m)
            continue
        g, local = divmod(m["index"], per_group)
        out[g].append(dict(m, index=local,
                           findings=[dict(f, shape_index=local) if "shape_index" in f else f
                                     for f in m.get("findings", [])]))
    return out, held


def _cpu_child(cfg: dict, target, source_path: Path, seed: int) -> dict:
    """The CPU check: bench_child.benchmark in this process with fake graphs and events, as tests do. The
    numbers mean nothing; what is checked is that grouping, reports and judging run end to end."""
    from gpu_worker.pipeline import bench_child, cpu_stand_in
    from gpu_worker.pipeline.child_run import load_module

    # no held-out shape: a drawn one can be large, minutes in the interpreter
    cpu_stand_in.bench_on_cpu(setattr, sets=8, held_out=0)
    cand = load_module(str(source_path), "aa_candidate").forward
    inc = load_module(str(source_path), "aa_incumbent").forward
    sink = cpu_stand_in.Messages()
    t0 = time.perf_counter()
    bench_child.benchmark(cfg, sink, target, cand, inc, target.baseline, seed, time.perf_counter)
    return {"messages": sink.messages, "wall_s": time.perf_counter() - t0, "released_s": 0.0, "warm_s": None,
            "protections": {"cpu_check": True}}


def run_child_group(target, info: dict, source: str, groups: int, seed: int, timeout_s: float, cpu: bool):
    """One bench child timing `groups` A/A evaluations, started as evaluate.py starts its bench child."""
    from gpu_worker.pipeline.evaluate import SCRATCH_PREFIX, write_source
    from gpu_worker.pipeline.sandbox import EarlyChild

    shapes = target.benchmark_shapes("smoke")
    if cpu:  # the CPU check interprets Triton: the target's smallest CPU shapes stand in for the smoke ones
        shapes = [dict(s, values="normal") for s in target.cpu_shapes[:len(shapes)]]
    shapes = shapes * groups
    root = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-aa-"))
    os.chmod(root, 0o711)
    try:
        scratch = root / "bench"
        scratch.mkdir()
        cand_path = write_source(scratch, "candidate.py", source)
        inc_path = write_source(scratch, "incumbent.py", source)
        # evaluate.py's child_cfg, field for field
        cfg = {"target": target.name, "target_document": None, "device": "cpu" if cpu else "cuda", "mode": "bench",
               "shapes": shapes, "profile": "smoke", "dsl": info["dsl"], "kernels": info["kernels"],
               "candidate_path": str(cand_path), "incumbent_path": str(inc_path)}
        if cpu:
            (scratch / "outputs").mkdir(parents=True, exist_ok=True)
            got = _cpu_child(dict(cfg, outputs_dir=str(scratch / "outputs")), target, cand_path, seed)
            messages, wall_s, released_s, protections = got["messages"], got["wall_s"], 0.0, got["protections"]
            gate_wait_s, timed_out, returncode = 0.0, False, 0
            run = None
        else:
            child = EarlyChild(cfg, secret=str(seed), timeout_s=timeout_s, scratch=scratch, device="cuda",
                               max_gate_wait_s=0.0).start()
            child.release()  # no verify stage to wait for: the seed goes in once the child has loaded
            run = child.result()
            messages, wall_s, released_s = run.messages, run.wall_s, run.released_s or 0.0
            protections, gate_wait_s = run.protections, run.gate_wait_s or 0.0
            timed_out, returncode = run.timed_out, run.returncode
        return {"messages": messages, "wall_s": wall_s, "released_s": released_s, "gate_wait_s": gate_wait_s,
                "protections": protections, "timed_out": timed_out, "returncode": returncode, "run": run,
                "cfg_shapes": shapes, "outputs": scratch / "outputs", "root": root}
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise


def child_reports(target, info: dict, source: str, spec_seed: int, groups: int, got: dict, first_id: int,
                  device: str, fp_before: dict, fp_after: dict, guard_findings: list) -> tuple[list[dict], list]:
    """The child's groups as reports (gpu_worker/contract.py), and its held-out shape entries."""
    from gpu_worker.contract import Hardware, Summary, to_json
    from gpu_worker.pipeline import referee, stats
    from gpu_worker.pipeline.bench_child import held_out_shapes
    from gpu_worker.pipeline.bench_report import bench_results
    from gpu_worker.pipeline.evaluate import Evaluation, clocks, crash_findings, dedupe

    per_group = len(target.benchmark_shapes("smoke"))
    kind = fp_before.get("kind")
    ceil = stats.ceilings_for(kind)
    messages = got["messages"]
    after_gate_s = got["wall_s"] - got["released_s"]
    # findings of the whole child: it died or timed out, or the referee's re-check of its saved replays
    child_findings = []
    if got["run"] is not None and not any(m.get("type") == "done" for m in messages):
        child_findings += crash_findings(got["run"], "benchmark")
    timed = got["cfg_shapes"] + held_out_shapes(target, spec_seed)
    ref = referee.judge_replays(target, timed, spec_seed, got["outputs"], messages, device) if device == "cuda" else []
    fatal = [m for m in messages if m.get("type") == "fatal" or (m.get("type") == "load" and m.get("status") == "fail")]
    grouped, held = group_messages(messages, per_group, groups)
    reports = []
    warm = next((m for m in messages if m.get("type") == "warm"), {})
    for g, msgs in enumerate(grouped):
        lo, hi = g * per_group, (g + 1) * per_group
        group_s = sum(m.get("seconds") or 0.0 for m in msgs)
        findings, per_shape, summary, claimed_s = bench_results(msgs + fatal, target, ceil, group_s)
        findings += [dict(f, shape_index=f["shape_index"] - lo) for f in ref
                     if f.get("shape_index") is not None and lo <= f["shape_index"] < hi]
        findings += [f for f in ref if f.get("shape_index") is None] + child_findings
        listed = [e for e in per_shape if not e.get("held_out")]
        status = "fail" if findings else ("pass" if listed and len(listed) == per_group else "error")
        ev = Evaluation({"target": target.name, "source": source, "incumbent_source": source, "profile": "smoke",
                         "candidate_id": f"aa-{first_id + g}", "seed": spec_seed, "e2e": False})
        ev.target, ev.device, ev.profile, ev.seed, ev.info = target, device, "smoke", spec_seed, info
        ev.report.target_version = target.version
        ev.report.mode = "gpu" if device == "cuda" else "cpu"
        ev.report.profile_effective = "smoke"
        ev.report.hardware = Hardware.from_dict(fp_before, "hardware")
        ev.report.isolation = got["protections"]
        ev.put("guard", {"status": "fail" if guard_findings else "pass", "findings": guard_findings,
                         "dsl": info["dsl"], "kernels": info["kernels"]})
        ev.put("verify", {"status": "skipped", "reason": SKIP_NOTE})
        ev.report.summary = Summary.from_dict(summary, "summary")
        ev.put("benchmark", {
            "status": status, "shapes": per_shape, "findings": dedupe(findings),
            "clocks_before": clocks(fp_before), "clocks_after": clocks(fp_after),
            "claimed_gpu_s": round(claimed_s, 4), "ceilings": ceil, "started_early": True,
            "child_wall_s": round(got["wall_s"], 3), "warm_s": warm.get("seconds"),
            "gate_wait_s": round(got["gate_wait_s"], 3), "after_gate_s": round(after_gate_s, 3),
            "seconds": round(group_s, 3)})
        ev.skip("e2e", "A/A: the benchmark decision only (bench/aa_h200.py)")
        ev.verdict()
        report = to_json(ev.report)
        report["wall_s"] = round(group_s, 3)
        reports.append(report)
    held_entries = bench_results(held, target, ceil, after_gate_s)[1]
    return reports, [e for e in held_entries if e.get("held_out")]


def run(out: Path, target_name: str, kernel: Path, budget_s: float, first: int, max_evals: int,
        cpu_groups: int | None) -> dict:
    from gpu_worker import hardware
    from gpu_worker.pipeline.guard import check_candidate
    from gpu_worker.targets import get_target

    t_start = time.monotonic()
    deadline = t_start + budget_s
    out.mkdir(parents=True, exist_ok=True)
    (out / "reports").mkdir(exist_ok=True)
    target = get_target(target_name)
    source = kernel.read_text()
    guard_findings, info = check_candidate(source, target)
    if guard_findings:
        raise SystemExit(f"the guard rejects {kernel}: {guard_findings}")
    device = "cpu" if cpu_groups else "cuda"
    children, n_evals, groups = [], 0, cpu_groups or first
    per_group_s, fixed_s = None, None
    while n_evals < max_evals and groups > 0:
        seed = secrets.randbits(63)
        fp_before = hardware.fingerprint()
        t0 = time.monotonic()
        got = run_child_group(target, info, source, groups, seed, max(60.0, deadline - t0 + 60), bool(cpu_groups))
        fp_after = hardware.fingerprint()
        try:
            reports, held = child_reports(target, info, source, seed, groups, got, n_evals + 1, device,
                                          fp_before, fp_after, guard_findings)
        finally:
            shutil.rmtree(got["root"], ignore_errors=True)
        for r in reports:
            (out / "reports" / f"{r['candidate_id']}.json").write_text(json.dumps(r))
        spent = time.monotonic() - t0
        shape_s = sum(m.get("seconds") or 0.0 for m in got["messages"] if m.get("type") == "bench_shape")
        warm = next((m.get("seconds") for m in got["messages"] if m.get("type") == "warm"), None)
        children.append({"seed": seed, "groups": groups, "first_id": n_evals + 1, "wall_s": round(spent, 2),
                         "child_wall_s": round(got["wall_s"], 2), "warm_s": warm, "shape_seconds": round(shape_s, 2),
                         "timed_out": got["timed_out"], "returncode": got["returncode"],
                         "messages": {t: sum(m.get("type") == t for m in got["messages"])
                                      for t in {m.get("type") for m in got["messages"]}},
                         "reports_pass": sum(r["stages"]["benchmark"]["status"] == "pass" for r in reports),
                         "held_out_shapes": held})
        (out / "children.json").write_text(json.dumps(children, indent=1))
        n_evals += groups
        print(f"child {len(children)}: {groups} A/A evaluations in {spent:.1f} s (warm {warm}, shapes {shape_s:.1f} s, "
              f"benchmark pass {children[-1]['reports_pass']}); {n_evals} so far, "
              f"{time.monotonic() - t_start:.0f} s", flush=True)
        if cpu_groups or not children[-1]["reports_pass"]:
            break  # the CPU check is one child; a child with no passing benchmark is not worth repeating
        # the next child: as many groups as the measured cost leaves before the deadline
        per_group_s = max(0.05, (spent - (warm or 0.0)) / groups)
        fixed_s = spent - per_group_s * groups
        left = deadline - time.monotonic() - 1.2 * fixed_s
        groups = min(max_evals - n_evals, int(left / (1.15 * per_group_s)))
        if groups < 5:
            break
    summary = summarize_dir(out)
    summary_meta = {"target": target_name, "kernel": str(kernel), "device": device, "budget_s": budget_s,
                    "wall_s": round(time.monotonic() - t_start, 1), "per_group_s": per_group_s, "fixed_s": fixed_s,
                    "hardware": hardware.fingerprint()}
    summary["run"] = summary_meta
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print_summary(summary)
    return summary


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("out", type=Path)
    r.add_argument("--target", default="dsa_topk")
    r.add_argument("--kernel", type=Path, default=ROOT / "gpu_worker/candidates/dsa_topk/best.py")
    r.add_argument("--budget-s", type=float, default=330.0)
    r.add_argument("--first", type=int, default=40)
    r.add_argument("--max-evals", type=int, default=400)
    r.add_argument("--cpu", type=int, default=None, metavar="N", help="the CPU check: N evaluations, fake timing")
    s = sub.add_parser("summarize")
    s.add_argument("out", type=Path)
    a = p.parse_args(argv)
    if a.cmd == "run":
        run(a.out, a.target, a.kernel, a.budget_s, a.first, a.max_evals, a.cpu)
    else:
        print_summary(summarize_dir(a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
