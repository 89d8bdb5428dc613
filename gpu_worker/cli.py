"""`python -m gpu_worker <command>`: targets, evaluate (more subcommands are added here)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from pathlib import Path

from .candidate_params import set_params
from .contract import Report, from_json, ncu_kernel_text
from .hardware import fingerprint
from .queues import gpu_queue
from .target_catalog import CATALOG


def _cmd_targets(args) -> int:
    rows = [t.describe() for t in CATALOG.values()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for t in rows:
        axes = ", ".join(f"{k} {lo}..{hi}" for k, (lo, hi) in t["axes"].items())
        print(f"{t['name']} v{t['version']}: {t['description']}")
        print(f"    axes: {axes}; DSLs: {', '.join(t['dsls'])}; e2e slot: {t['e2e_slot'] or '-'}")
    return 0


def _interval(ci) -> str:
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "[not measured]"


def _us(value) -> str:
    return f"{value:.1f}" if value is not None else "not measured"


def _fraction(value) -> str:
    return f"{value:.2f}" if value is not None else "not measured"


def _summary_lines(report: Report) -> list[str]:
    v = report.verdict
    lines = [f"{report.target} [{report.mode}, {report.profile_effective or report.profile}]: {v.status}"
             + (f" ({', '.join(v.reasons)})" if v.reasons else "")]
    for name in ("guard", "verify", "benchmark", "e2e"):
        st = report.stage(name)
        if st is None:
            continue
        extra = st.reason or "; ".join(f.code + (f" (line {f.line})" if f.line else "") for f in st.findings[:5])
        lines.append(f"  {name:9s} {st.status:12s} {st.seconds or 0:6.1f}s  {extra}")
    bench = report.stages.benchmark
    for s in bench.shapes if bench else []:
        if s.ratio is None:
            continue
        c, i = s.candidate, s.incumbent
        # the axes: every whole-number field but top-k's fixed k (an imported target names its own axes)
        shape = json.dumps({k: v for k, v in s.shape.items() if type(v) is int and k != "k"})
        timing = (f" cand {s.ratio_of} {_us(getattr(c, s.ratio_of + '_us'))} p99 {_us(c.p99_us)},"
                  f" inc {s.ratio_of} {_us(getattr(i, s.ratio_of + '_us'))} p99 {_us(i.p99_us)},")
        lines.append(f"    {shape}{' held out' if s.held_out else ''}{timing} ratio of {s.ratio_of}s {s.ratio:.3f}"
                     f" {_interval(s.ratio_ci95)}, A/A {_interval(s.aa_ci95)}, floor {_fraction(s.floor_fraction)}")
    for s in bench.shapes if bench else []:
        found = (s.profile or {}).get("ncu")
        if found:   # Nsight Compute's counters at one shape (pipeline/ncu.py): context, never scored
            shape = json.dumps({k: v for k, v in s.shape.items() if type(v) is int and k != "k"})
            lines.append(f"    ncu at {shape}: " + ("; ".join(
                ncu_kernel_text(k, 40) for k in found.get("kernels") or []) or found.get("error") or "nothing profiled"))
    if report.summary.geomean_speedup:
        lines.append(f"  geomean speedup {report.summary.geomean_speedup:.3f} {_interval(report.summary.geomean_ci95)}")
    # The e2e stage's status says only that the gate ran: its points are measurements, judged by the keep rule
    # (loop/policy.py, docs/keep-rule.md) on the console's side, so each is printed with its intervals
    e2e = report.stages.e2e
    for p in e2e.points if e2e and e2e.points else []:
        if p.ratio is None:
            continue
        ceiling = (f", {p.ceiling_attained:.0%} of the ceiling ({p.ceiling_ratio:.2f}x the default)"
                   if p.ceiling_attained is not None and p.ceiling_ratio is not None else "")
        lines.append(f"    e2e B={p.batch} L={p.context}: tokens/s {p.ratio:.3f} {_interval(p.ratio_ci95)} of the "
                     f"{p.baseline or 'baseline'}'s, A/A {_interval(p.aa_ci95)}{ceiling}")
    lines.append(f"  wall {report.wall_s or 0:.1f}s")
    return lines


def _document(args) -> dict | None:
    """The imported target's document from a FlashInfer-Bench Definition and what `import_definition` takes
    beside it (docs/interop.md), or None after printing what is wrong."""
    # local: the `fib` extra (flashinfer-bench) is needed only for an imported target
    from .fib.document import DocumentError
    from .fib.reader import build_document

    try:
        declared = json.loads(Path(args.inputs).read_text()) if args.inputs else {}
        if not isinstance(declared, dict):
            raise DocumentError(f"{args.inputs}: expected a JSON object with 'inputs' and optionally 'check'")
        doc = build_document(Path(args.definition).read_text(),
                             Path(args.workloads).read_text() if args.workloads else "", args.ranges,
                             None, declared.get("inputs") or None, args.check or declared.get("check"))
    except (OSError, ValueError) as exc:  # DocumentError is a ValueError
        print(f"error: cannot import {args.definition}: {exc}", file=sys.stderr)
        return None
    if doc["definition"]["name"] != args.target:
        print(f"error: --target {args.target} but the definition is named {doc['definition']['name']}", file=sys.stderr)
        return None
    return doc


def _cmd_evaluate(args) -> int:
    from .pipeline import evaluate  # local: torch and the targets load only for the commands that run kernels

    source = Path(args.candidate).read_text()
    incumbent = Path(args.incumbent).read_text() if args.incumbent else None
    if args.set:
        try:
            source, changed = set_params(source, args.set)
        except (ValueError, SyntaxError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"[candidate] {args.candidate} with PARAMS {json.dumps(changed)}", file=sys.stderr, flush=True)
    spec = {"candidate_id": args.candidate_id or f"cli-{uuid.uuid4().hex[:8]}", "attempt": 1, "target": args.target,
            "source": source, "incumbent_source": incumbent, "profile": args.profile}
    if args.seed is not None:
        spec["seed"] = args.seed
    if args.definition:
        spec["target_document"] = _document(args)
        if spec["target_document"] is None:
            return 2

    def progress(stage, status, detail):
        print(f"[{stage}] {status} {json.dumps(detail) if detail else ''}".rstrip(), file=sys.stderr, flush=True)

    report = evaluate(spec, on_progress=progress)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=2))
    else:
        print(json.dumps(report, indent=2))
    print("\n".join(_summary_lines(from_json(report))), file=sys.stderr)
    return 0 if report["verdict"]["status"] == "pass" else 1


def _cmd_worker(args) -> int:
    """A GPU worker for one GPU: Celery, solo pool (CUDA cannot be used in a forked child)."""
    hardware = args.hardware or os.environ.get("ARK_HARDWARE") or fingerprint()["kind"]
    os.environ["ARK_HARDWARE"] = hardware
    if hardware == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
        os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
    from .celery_app import app  # local: after ARK_HARDWARE and the interpreter settings are in place

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
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="evaluate the candidate with this PARAMS entry changed (repeatable; the name must be in its "
                        "PARAMS or SPACE); e.g. the best against itself: --incumbent best.py --set VLIN=1")
    imported = p.add_argument_group("an imported target (a FlashInfer-Bench Definition; needs the `fib` extra)")
    imported.add_argument("--definition", help="Definition JSON; --target is its name")
    imported.add_argument("--workloads", help="JSONL of its workload traces (their span is the range by default)")
    imported.add_argument("--range", dest="ranges", action="append", default=[], metavar="AXIS=LO:HI")
    imported.add_argument("--inputs", help='JSON {"inputs": {...}, "check": "<built-in target>"}, e.g. the '
                          "definition's .inputs.json")
    imported.add_argument("--check", help="a built-in target whose check replaces the per-output tolerance")
    p.set_defaults(func=_cmd_evaluate)
    p = sub.add_parser("worker", help="consume gpu.<hardware> as a Celery worker (one per GPU)")
    p.add_argument("--hardware", help="hardware kind, e.g. h200 (default: ARK_HARDWARE, else detected, else cpu)")
    p.add_argument("--name", help="Celery node name (default gpu-<hardware>@host)")
    p.set_defaults(func=_cmd_worker)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.func in (_cmd_evaluate, _cmd_worker):
        from .pipeline.sandbox import scrub_environ_block  # local: `targets` runs without torch

        scrub_environ_block()  # before any candidate runs: /proc/<this pid>/environ shows nothing
    return args.func(args)
