"""Turn `python -m gpu_worker evaluate` reports into bench/results records and a markdown table.

    python bench/collect_reports.py REPORTS_DIR OUT_DIR [--measured-on YYYY-MM-DD] [--also RUN_DIR]

Reads REPORTS_DIR/<target>__<kernel>.json (and the command beside it in .cmd), writes
OUT_DIR/latest.json: [{"target", "shape", "held_out", "kernel", "mean_us", "mean_ci95_us", "median_us",
"ci95_us", "p99_us", "max_us", "slow_fraction", "floor_fraction", "gpu", "date", "command"}] and OUT_DIR/latest.md
(per shape and kernel: mean with its interval, p50, p99, max, slow-call fraction; A/A noise; wall time per
evaluation). Reports from before the tail-aware benchmark carry medians only: their mean and tail print as "-".
--also RUN_DIR adds the evaluations of a proof run whose report files did not come back, from the
latest.json and evaluations.json that this script wrote there (its candidate records; the default kernel's
come from the reports here): they replace a report of the same target and kernel.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _axes(target: str, shape: dict) -> dict:
    keys = {"dsa_topk": ("rows", "n_ctx"), "dsa_indexer_topk": ("rows", "n_ctx"), "dsa_indexer_topk_fp8": ("rows", "n_ctx"),
            "add_rmsnorm": ("tokens", "hidden")}
    return {k: shape[k] for k in keys.get(target, tuple(shape)) if k in shape}


def _timing(k: dict) -> dict:
    return {name: k.get(name) for name in ("mean_us", "mean_ci95_us", "median_us", "ci95_us", "p99_us", "max_us",
                                           "slow_fraction")}


def collect(reports_dir: Path, measured_on: str | None = None) -> tuple[list[dict], list[dict]]:
    """measured_on: the date for reports written before reports carried their own "date"."""
    records, evaluations = [], []
    seen_default = set()
    for path in sorted(reports_dir.glob("*.json")):
        target_name, _, kernel = path.stem.partition("__")
        report = json.loads(path.read_text())
        date = report.get("date") or measured_on
        if date is None:
            raise SystemExit(f"{path} carries no date: pass --measured-on YYYY-MM-DD")
        cmd_path = path.with_suffix(".cmd")
        command = cmd_path.read_text().strip() if cmd_path.exists() else ""
        gpu = (report.get("hardware") or {}).get("gpu")
        stages = report.get("stages") or {}
        bench = stages.get("benchmark") or {}
        vb = [stages.get(n, {}).get("seconds") for n in ("verify", "benchmark")]
        evaluations.append({"target": report.get("target"), "kernel": kernel, "verdict": report.get("verdict"),
                            "wall_s": report.get("wall_s"), "date": date,
                            "verify_benchmark_s": round(sum(vb), 1) if None not in vb else None,
                            "e2e_s": stages.get("e2e", {}).get("seconds"), "verify": stages.get("verify", {}).get("status"),
                            "benchmark": bench.get("status"), "clocks_before": bench.get("clocks_before"),
                            "clocks_after": bench.get("clocks_after"), "summary": report.get("summary")})
        for s in bench.get("shapes") or []:
            if "candidate" not in s:
                continue
            shape = _axes(report["target"], s["shape"])
            floor = s.get("floor_us")
            base = {"target": report["target"], "shape": shape, "gpu": gpu, "date": date, "command": command}
            base["held_out"] = bool(s.get("held_out"))
            c = s["candidate"]
            records.append(dict(base, kernel=kernel, **_timing(c), floor_fraction=s.get("floor_fraction"),
                                noise_aa=s.get("noise_aa"), ratio_vs_incumbent=s.get("ratio"),
                                ratio_ci95=s.get("ratio_ci95"), ratio_of=s.get("ratio_of", "median"),
                                tail_ratio=s.get("tail_ratio")))
            default = s.get("default") or s.get("incumbent")
            key = (report["target"], json.dumps(shape, sort_keys=True))
            if default and key not in seen_default:
                seen_default.add(key)
                center = default.get("mean_us") or default["median_us"]
                records.append(dict(base, kernel="default", **_timing(default),
                                    floor_fraction=(floor / center) if floor else None, noise_aa=s.get("noise_aa")))
    return records, evaluations


def also(records: list[dict], evaluations: list[dict], run_dir: Path) -> tuple[list[dict], list[dict]]:
    extra_evals = json.loads((run_dir / "evaluations.json").read_text())
    pairs = {(e["target"], e["kernel"]) for e in extra_evals}
    extra = [dict(r, collected_from=str(run_dir)) for r in json.loads((run_dir / "latest.json").read_text())
             if (r["target"], r["kernel"]) in pairs]
    keep = [r for r in records if (r["target"], r["kernel"]) not in pairs]
    kept_evals = [e for e in evaluations if (e["target"], e["kernel"]) not in pairs]
    return keep + extra, kept_evals + [dict(e, collected_from=str(run_dir)) for e in extra_evals]


def markdown(records: list[dict], evaluations: list[dict]) -> str:
    def us(v):
        return f"{v:.1f}" if v is not None else "-"

    lines = ["# H200 results (latest)", "", "| target | shape | kernel | mean us | 95% CI us | p50 us | p99 us | max us | "
             "slow calls | floor fraction | A/A noise |", "|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in sorted(records, key=lambda r: (r["target"], r.get("held_out", False),
                                            json.dumps(r["shape"], sort_keys=True), r["kernel"])):
        ci = r.get("mean_ci95_us") or [None, None]
        ci_s = f"{ci[0]:.1f} to {ci[1]:.1f}" if ci[0] is not None else "-"
        ff = f"{r['floor_fraction']:.3f}" if r.get("floor_fraction") else "-"
        aa = f"{r['noise_aa']:.3f}" if r.get("noise_aa") is not None else "-"
        slow = f"{r['slow_fraction']:.3f}" if r.get("slow_fraction") is not None else "-"
        shape = ", ".join(f"{k}={v}" for k, v in r["shape"].items()) + (" (held out)" if r.get("held_out") else "")
        lines.append(f"| {r['target']} | {shape} | {r['kernel']} | {us(r.get('mean_us'))} | {ci_s} | "
                     f"{us(r.get('median_us'))} | {us(r.get('p99_us'))} | {us(r.get('max_us'))} | {slow} | {ff} | {aa} |")
    lines += ["", "| target | kernel | date | verdict | verify | benchmark | verify + benchmark s | e2e s | "
              "wall s (one full evaluation) | geomean speedup |", "|---|---|---|---|---|---|---:|---:|---:|---:|"]
    for e in evaluations:
        v = e.get("verdict") or {}
        gm = (e.get("summary") or {}).get("geomean_speedup")
        lines.append(f"| {e['target']} | {e['kernel']} | {e['date'][:10]} | {v.get('status')} "
                     f"{','.join(v.get('reasons') or [])} | {e['verify']} | {e['benchmark']} | "
                     f"{e['verify_benchmark_s']} | {e['e2e_s'] or '-'} | {e['wall_s']} | {f'{gm:.3f}' if gm else '-'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    measured_on = None
    if "--measured-on" in argv:
        i = argv.index("--measured-on")
        measured_on, argv = argv[i + 1], argv[:i] + argv[i + 2:]
    run_dirs = []
    while "--also" in argv:
        i = argv.index("--also")
        run_dirs, argv = run_dirs + [Path(argv[i + 1])], argv[:i] + argv[i + 2:]
    reports_dir, out_dir = Path(argv[0]), Path(argv[1])
    records, evaluations = collect(reports_dir, measured_on)
    for run_dir in run_dirs:
        records, evaluations = also(records, evaluations, run_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "latest.json").write_text(json.dumps(records, indent=2))
    (out_dir / "evaluations.json").write_text(json.dumps(evaluations, indent=2))
    (out_dir / "latest.md").write_text(markdown(records, evaluations))
    print(f"{len(records)} records from {len(evaluations)} reports -> {out_dir}/latest.json, latest.md")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
