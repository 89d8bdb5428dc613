"""`python -m gpu_worker <command>`: targets, evaluate (more subcommands are added here)."""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from pathlib import Path


def _cmd_targets(args) -> int:
    from .targets import TARGETS
    rows = [t.describe() for t in TARGETS.values()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for t in rows:
        axes = ", ".join(f"{k} {lo}..{hi}" for k, (lo, hi) in t["axes"].items())
        print(f"{t['name']} v{t['version']}: {t['description']}")
        print(f"    axes: {axes}; DSLs: {', '.join(t['dsls'])}; e2e slot: {t['e2e_slot'] or '-'}")
    return 0


def _summary_lines(report: dict) -> list[str]:
    v = report.get("verdict", {})
    lines = [f"{report.get('target')} [{report.get('mode')}, {report.get('profile_effective', report.get('profile'))}]: "
             f"{v.get('status')}" + (f" ({', '.join(v.get('reasons', []))})" if v.get("reasons") else "")]
    for name in ("guard", "verify", "benchmark", "e2e"):
        st = report.get("stages", {}).get(name)
        if not st:
            continue
        extra = st.get("reason") or "; ".join(f"{f['code']}" + (f" (line {f['line']})" if f.get("line") else "")
                                             for f in st.get("findings", [])[:5])
        lines.append(f"  {name:9s} {st.get('status'):12s} {st.get('seconds', 0) or 0:6.1f}s  {extra}")
    bench = report.get("stages", {}).get("benchmark", {})
    for s in bench.get("shapes", []) if isinstance(bench.get("shapes"), list) else []:
        if "ratio" in s:
            c, i = s["candidate"], s["incumbent"]
            shape = json.dumps({k: v for k, v in s["shape"].items() if k in ("rows", "n_ctx", "tokens", "hidden")})
            if c.get("mean_us") is None:  # a report from before the tail-aware benchmark: medians only
                timing = f" cand median {c['median_us']:.1f} us, inc median {i['median_us']:.1f} us,"
            else:
                timing = (f" cand mean {c['mean_us']:.1f} p99 {c['p99_us']:.1f} (slow {c['slow_fraction']:.0%}),"
                          f" inc mean {i['mean_us']:.1f} p99 {i['p99_us']:.1f},")
            lines.append(f"    {shape}{' held out' if s.get('held_out') else ''}{timing}"
                         f" ratio {s['ratio']:.3f} [{s['ratio_ci95'][0]:.3f}, {s['ratio_ci95'][1]:.3f}],"
                         f" A/A {s['noise_aa']:.3f}, floor {(s.get('floor_fraction') or 0):.2f}")
    summ = report.get("summary") or {}
    if summ.get("geomean_speedup"):
        lo, hi = summ["geomean_ci95"]
        lines.append(f"  geomean speedup {summ['geomean_speedup']:.3f} [{lo:.3f}, {hi:.3f}]")
    lines.append(f"  wall {report.get('wall_s', 0):.1f}s")
    return lines


def _cmd_evaluate(args) -> int:
    from .pipeline import evaluate
    source = Path(args.candidate).read_text()
    incumbent = Path(args.incumbent).read_text() if args.incumbent else None
    spec = {"candidate_id": args.candidate_id or f"cli-{uuid.uuid4().hex[:8]}", "attempt": 1, "target": args.target,
            "source": source, "incumbent_source": incumbent, "profile": args.profile}
    if args.seed is not None:
        spec["seed"] = args.seed

    def progress(stage, status, detail):
        print(f"[{stage}] {status} {json.dumps(detail) if detail else ''}".rstrip(), file=sys.stderr, flush=True)

    report = evaluate(spec, on_progress=progress)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=2))
    else:
        print(json.dumps(report, indent=2))
    print("\n".join(_summary_lines(report)), file=sys.stderr)
    return 0 if report.get("verdict", {}).get("status") == "pass" else 1


def _cmd_worker(args) -> int:
    """A GPU worker for one GPU: Celery, solo pool (CUDA cannot be used in a forked child)."""
    import os

    from .hardware import fingerprint
    from .queues import gpu_queue

    hardware = args.hardware or os.environ.get("ARK_HARDWARE") or fingerprint()["kind"]
    os.environ["ARK_HARDWARE"] = hardware
    if hardware == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
        os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
    from .celery_app import app

    app.worker_main(["worker", "-Q", gpu_queue(hardware), "--pool=solo", "--loglevel=INFO",
                     "-n", args.name or f"gpu-{hardware}@%h"])
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m gpu_worker", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("targets", help="list targets, their axes and DSLs")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_targets)
    p = sub.add_parser("evaluate", help="run guard, verify and benchmark on one candidate file")
    p.add_argument("--target", required=True)
    p.add_argument("--candidate", required=True, help="candidate source file")
    p.add_argument("--incumbent", help="incumbent source file (default: the target's default kernel)")
    p.add_argument("--profile", choices=["smoke", "full"], default="smoke")
    p.add_argument("--out", help="write the report JSON here (default: stdout)")
    p.add_argument("--seed", type=int, help="fixed secret seed (reproduce a report); default: random")
    p.add_argument("--candidate-id")
    p.set_defaults(func=_cmd_evaluate)
    p = sub.add_parser("worker", help="consume gpu.<hardware> as a Celery worker (one per GPU)")
    p.add_argument("--hardware", help="hardware kind, e.g. h200 (default: ARK_HARDWARE, else detected, else cpu)")
    p.add_argument("--name", help="Celery node name (default gpu-<hardware>@host)")
    p.set_defaults(func=_cmd_worker)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.func in (_cmd_evaluate, _cmd_worker):
        from .pipeline.sandbox import scrub_environ_block

        scrub_environ_block()  # before any candidate runs: /proc/<this pid>/environ shows nothing
    return args.func(args)
