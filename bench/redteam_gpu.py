"""Run red-team candidates through evaluate() without pytest (the GPU host has none) and check
that each gets the finding its header names. Writes a JSON summary; exit 1 on any miss.

    python bench/redteam_gpu.py OUT.json [--budget-s 150] [--resume EARLIER.json] [--all | name ...]

--all runs every candidate file, the benchmark-side ones and the honest ones first (a run cut short by its
budget still says the most). --resume keeps the results of an earlier call and runs only the candidates it
did not reach, so that a run longer than one device call is made in several. Each result keeps the
benchmark's per-shape figures of a candidate that reached it (means, p99, slow share, ratio and A/A
intervals), so a red-team run also counts A/A comparisons.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpu_worker.pipeline import evaluate
from tests.redteam.catalog import CANDIDATES, load

DEFAULT = ["graph_sync", "honest_topk_bisect", "honest_rmsnorm_twopass", "honest_indexer_f32", "cached_result",
           "uninit_pads", "nondeterministic_ties", "crash_oob", "torch_work_token_kernel", "static_output"]


def _codes(report: dict) -> list[str]:
    return sorted({f.get("code", "") for st in report.get("stages", {}).values() if isinstance(st, dict)
                   for f in st.get("findings", [])})


def _bench_shapes(report: dict) -> list[dict]:
    """What the benchmark measured per shape (nothing when the candidate failed before it)."""
    stage = report.get("stages", {}).get("benchmark") or {}
    keep = ("shape", "held_out", "input_sets", "ratio", "ratio_ci95", "aa_ratio", "aa_ci95", "tail_ratio",
            "tail_ratio_ci95", "default_ratio")
    per_kernel = ("mean_us", "mean_ci95_us", "median_us", "p99_us", "max_us", "slow_fraction", "calls")
    return [dict({k: e.get(k) for k in keep},
                 **{n: {k: e[n].get(k) for k in per_kernel} for n in ("candidate", "incumbent", "incumbent_aa", "default")
                    if isinstance(e.get(n), dict)})
            for e in stage.get("shapes", []) if isinstance(e, dict)]


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    budget = 150.0
    names, earlier = [], []
    rest = argv[1:]
    while rest:
        a = rest.pop(0)
        if a == "--budget-s":
            budget = float(rest.pop(0))
        elif a == "--resume":
            earlier = [r for r in json.loads(Path(rest.pop(0)).read_text()) if "verdict" in r]
        elif a == "--all":
            names += sorted((p.stem for p in CANDIDATES.glob("*.py")),
                            key=lambda n: (not n.startswith(("bench_", "honest_")), n))
        else:
            names.append(a)
    names = names or DEFAULT
    t0 = time.monotonic()
    results = list(earlier)
    misses = sum(not r["ok"] for r in earlier)
    done = {r["name"] for r in earlier}
    for name in (n for n in names if n not in done):
        if time.monotonic() - t0 > budget:
            results.append({"name": name, "skipped": "time budget"})
            continue
        c = load(CANDIDATES / f"{name}.py")
        target, expect = c.target, list(c.expect)
        # the e2e gate adds minutes per passing candidate and no finding outside e2e:*, so it runs only there
        spec = {"candidate_id": name, "target": target, "source": c.source, "profile": "smoke",
                "e2e": any(e.startswith("e2e:") for e in expect)}
        if "verify:timeout" in expect:
            spec["verify_timeout_s"] = 20
        report = evaluate(spec)
        v = report["verdict"]
        ok = v["status"] == "pass" if expect == ["pass"] else (v["status"] == "fail" and bool(set(expect) & set(v["reasons"])))
        misses += not ok
        results.append({"name": name, "target": target, "expect": expect, "verdict": v, "ok": ok,
                        "wall_s": report.get("wall_s"), "findings": _codes(report),
                        "bench_shapes": _bench_shapes(report)})
        print(f"{'ok  ' if ok else 'MISS'} {name}: expected {expect}, got {v['status']} {v['reasons']}", flush=True)
        out.write_text(json.dumps(results, indent=2))   # after each: a run cut short keeps what it saw
    out.write_text(json.dumps(results, indent=2))
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
