"""How often does a kernel look faster than itself? Reads A/A evaluation reports (candidate and incumbent
the same source) and red-team results, and counts, per timed shape, the comparisons the keep rule would call
faster. Writes a JSON summary and prints one line per kind of comparison.

    python bench/aa_rate.py OUT.json REPORT.json ... [--redteam redteam_gpu.json]

Two kinds of A/A comparison are counted:
- candidate vs incumbent of an A/A evaluation, judged exactly as a real candidate is (loop.policy.judge:
  the ratio's interval against the run's A/A noise floor, default policy);
- incumbent vs its A/A copy (aa_ci95) of any evaluation, against the bare threshold only (no noise floor can
  be taken from the interval being judged): an upper bound below 1 - threshold counts as a false "faster".
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from loop.policy import FASTER, RunPolicy, judge


def _shapes_of_report(path: Path) -> list[dict]:
    r = json.loads(path.read_text())
    stage = r.get("stages", {}).get("benchmark") or {}
    return [s for s in stage.get("shapes", []) if isinstance(s, dict) and s.get("ratio_ci95")]


def main(argv: list[str]) -> int:
    out, paths, redteam = Path(argv[0]), [], None
    rest = argv[1:]
    while rest:
        a = rest.pop(0)
        if a == "--redteam":
            redteam = Path(rest.pop(0))
        else:
            paths.append(Path(a))
    policy = RunPolicy()
    judged = []  # (candidate vs incumbent, same source): the keep rule's own call
    for p in paths:
        for s in _shapes_of_report(p):
            judged.append({"report": p.name, "shape": s["shape"], "held_out": s.get("held_out"),
                           "ratio": s["ratio"], "ratio_ci95": s["ratio_ci95"], "aa_ci95": s.get("aa_ci95"),
                           "call": judge(s["ratio_ci95"], s.get("aa_ci95"), policy)})
    copies = []  # incumbent vs its A/A copy, from every evaluation that reached the benchmark
    for p in paths:
        copies += [{"source": p.name, "aa_ratio": s.get("aa_ratio"), "aa_ci95": s["aa_ci95"]}
                   for s in _shapes_of_report(p) if s.get("aa_ci95")]
    if redteam and redteam.exists():
        for r in json.loads(redteam.read_text()):
            copies += [{"source": r["name"], "aa_ratio": s.get("aa_ratio"), "aa_ci95": s["aa_ci95"]}
                       for s in r.get("bench_shapes") or [] if s.get("aa_ci95")]
    for c in copies:
        c["call"] = judge(tuple(c["aa_ci95"]), delta=policy.threshold)
        c["excludes_1"] = c["aa_ci95"][1] < 1.0 or c["aa_ci95"][0] > 1.0
    summary = {
        "policy": {"threshold": policy.threshold, "noise_multiplier": policy.noise_multiplier},
        "evaluations": len(paths),
        "judged_comparisons": len(judged),
        "judged_faster": sum(j["call"] == FASTER for j in judged),
        "copy_comparisons": len(copies),
        "copy_faster_beyond_threshold": sum(c["call"] == FASTER for c in copies),
        "copy_interval_excludes_1": sum(c["excludes_1"] for c in copies),
        "judged": judged, "copies": copies,
    }
    out.write_text(json.dumps(summary, indent=2))
    print(f"A/A evaluations: {len(paths)}; candidate-vs-incumbent shape comparisons judged by the keep rule: "
          f"{len(judged)}, called faster: {summary['judged_faster']}")
    print(f"incumbent-vs-copy shape comparisons: {len(copies)}, upper bound below 1 - {policy.threshold}: "
          f"{summary['copy_faster_beyond_threshold']}, interval excluding 1 (either side): "
          f"{summary['copy_interval_excludes_1']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
