"""The worker's side of the independent re-timing (docs/isolation.md, Independent re-timing).

Two fresh sandboxed children (sandbox.run_child, mode "retime"): the first times the target's default kernel
and never sees candidate code, the second times the candidate. Both use triton's do_bench_cudagraph
(retime_child.py). The parent trusts only numbers: it reads `retimed` messages, checks each is a finite
positive time for a shape it asked for, that the child lived at least as long, by the parent's clock, as the
timing it claims took, and collects tamper findings. Every other message is ignored, so a candidate cannot
send a verdict: the loop computes one from these numbers against the report (gpu_worker/fib/confirm.py)."""

from __future__ import annotations

import math
import os
import secrets
import shutil
import tempfile
from pathlib import Path

from ..fib.confirm import NOT_ON_CPU
from ..targets import get_target
from .retime_child import REP_MS
from .sandbox import SandboxRefused, run_child

TIMER = "triton.do_bench_cudagraph"
CHILD_TIMEOUT_S = 600.0
WALL_SLACK_S = 0.5  # the child's clock and the parent's start at different moments
# the default's child imports this instead of a candidate: no candidate code ever runs in it
DEFAULT_STUB = "def forward(*args):\n    raise RuntimeError('the default-timing child calls the target baseline')\n"


def retime_sandboxed(spec: dict, *, device: str | None = None, runner=run_child) -> dict:
    """spec: {"target", "target_document"?, "source", "shapes"?, "dsl"?, "kernels"?} -> {"status":
    "measured"|"unavailable", "reason"?, "timer", "shapes": [{"shape", "candidate_us", "default_us"}],
    "findings": [harness-written findings]}."""
    if device is None:
        import torch  # local: a worker that only pings never needs it

        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device != "cuda":
        return {"status": "unavailable", "reason": NOT_ON_CPU, "timer": None, "shapes": [], "findings": []}
    target = get_target(spec["target"], spec.get("target_document"))
    shapes = list(spec.get("shapes") or target.benchmark_shapes("full"))
    seed = secrets.randbelow(1 << 31)
    root = Path(tempfile.mkdtemp(prefix="ark-retime-"))
    os.chmod(root, 0o711)  # a child running as nobody must traverse it
    try:
        timed = {}
        for which, source in (("default", DEFAULT_STUB), ("candidate", spec["source"])):
            scratch = root / which
            (scratch / "work").mkdir(parents=True)
            path = scratch / "work" / "candidate.py"
            path.write_text(source)
            os.chmod(path, 0o644)
            cfg = {"target": spec["target"], "target_document": spec.get("target_document"), "device": device,
                   "mode": "retime", "which": which, "shapes": shapes, "profile": "full",
                   "dsl": spec.get("dsl") or "triton", "kernels": list(spec.get("kernels") or []),
                   "candidate_path": str(path), "incumbent_path": None}
            try:
                run = runner(cfg, secret=str(seed), timeout_s=CHILD_TIMEOUT_S, scratch=scratch, device=device)
            except SandboxRefused as refused:
                return {"status": "unavailable", "reason": str(refused), "timer": TIMER, "shapes": [], "findings": []}
            timed[which] = child_times(run, len(shapes), which)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    findings = timed["default"][1] + timed["candidate"][1]
    rows = [{"shape": shape, "candidate_us": timed["candidate"][0].get(i), "default_us": timed["default"][0].get(i)}
            for i, shape in enumerate(shapes)]
    return {"status": "measured", "timer": TIMER, "shapes": rows, "findings": findings}


def child_times(run, n_shapes: int, which: str) -> tuple[dict[int, float], list[dict]]:
    """The times a re-timing child sent that pass the parent's checks, and findings for what did not."""
    times, claimed_wall, findings = {}, 0.0, []

    def finding(message: str) -> None:
        findings.append({"code": "bench:unconfirmed", "message": f"re-timing the {which}: {message}"})

    for m in run.messages:
        kind = m.get("type")
        if kind == "tamper":
            codes = sorted({str(f.get("code"))[:40] for f in m.get("findings") or [] if isinstance(f, dict)})
            finding(f"the child reported {', '.join(codes) or 'tampering'}")
        elif kind == "load" and m.get("status") != "pass":
            finding("the kernel did not load")
        elif kind == "retimed":
            i, us, wall = m.get("index"), m.get("us"), m.get("wall_s")
            if not (isinstance(i, int) and 0 <= i < n_shapes and i not in times and _positive(us) and _positive(wall)):
                finding("a timing message was malformed or repeated")
                continue
            times[i] = float(us)
            claimed_wall += float(wall)
    if not any(m.get("type") == "done" for m in run.messages):
        finding(f"the child did not finish (exit {run.returncode}{', timed out' if run.timed_out else ''})")
    if len(times) < n_shapes and not findings:
        finding(f"{n_shapes - len(times)} of {n_shapes} shapes were not timed")
    if claimed_wall > run.wall_s + WALL_SLACK_S:
        finding(f"the child says its timing took {claimed_wall:.2f} s, but it lived {run.wall_s:.2f} s by the "
                "worker's clock")
    floor_s = len(times) * REP_MS / 1000.0  # do_bench_cudagraph spends at least its budget on every shape
    if times and run.wall_s < floor_s:
        finding(f"the child lived {run.wall_s:.2f} s by the worker's clock, less than the {floor_s:.1f} s "
                "its timer needs for the shapes it reports")
    return times, findings


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0
