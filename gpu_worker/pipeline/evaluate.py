"""evaluate(spec) -> report: guard, verify, benchmark, e2e for one candidate (DESIGN.md, Contracts)."""

from __future__ import annotations

import datetime
import math
import os
import secrets
import shutil
import tempfile
import time
import traceback
from pathlib import Path

from .. import hardware
from ..targets import get_target
from . import referee, stats
from .guard import check_candidate
from .bench_child import held_out_shapes
from .bench_report import bench_results
from .sandbox import EarlyChild, run_child

SCHEMA = "ark.report/1"
SCRATCH_PREFIX = "ark-eval-"  # then the evaluating process's pid: sweep_stale_scratch
VERIFY_TIMEOUT_S = {"cpu": 480.0, "smoke": 420.0, "full": 420.0}  # every profile verifies the whole range (docs/verification.md)
BENCH_TIMEOUT_S = {"smoke": 180.0, "full": 420.0}
E2E_TIMEOUT_S = 420.0


def _device() -> str:
    forced = os.environ.get("ARK_DEVICE")
    if forced in ("cpu", "cuda"):
        return forced
    try:
        import torch
        return "cuda" if torch.cuda.is_available() else "cpu"
    except Exception:
        return "cpu"


def _clean(value):
    """JSON-safe: non-finite floats become None, tuples lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


class _Stages:
    def __init__(self, report: dict, on_progress):
        self.report, self.on_progress = report, on_progress

    def start(self, name: str, **detail) -> float:
        self._notify(name, "running", detail)
        return time.monotonic()

    def end(self, name: str, t0: float, entry: dict) -> dict:
        entry["seconds"] = round(time.monotonic() - t0, 3)
        entry.setdefault("findings", [])
        self.report["stages"][name] = entry
        self._notify(name, entry["status"], {"findings": [f["code"] for f in entry["findings"]]})
        return entry

    def put(self, name: str, entry: dict) -> None:
        """A stage that did not run (skipped, unavailable): recorded and announced."""
        entry.setdefault("findings", [])
        entry.setdefault("seconds", 0.0)
        self.report["stages"][name] = entry
        self._notify(name, entry["status"], {"reason": entry.get("reason")})

    def _notify(self, stage, status, detail):
        if self.on_progress:
            try:
                self.on_progress(stage, status, detail)
            except Exception:
                pass


def evaluate(spec: dict, *, on_progress=None) -> dict:
    """Run the pipeline on one candidate. Never raises for a bad candidate; returns the report."""
    from gpu_worker.targets.allreduce import MULTI_PROCESS_TARGETS

    if spec.get("target") in MULTI_PROCESS_TARGETS:
        from gpu_worker.distributed.runner import evaluate_distributed

        return evaluate_distributed(spec, on_progress=on_progress)
    wall0 = time.monotonic()
    report = {"schema": SCHEMA, "candidate_id": spec.get("candidate_id"), "attempt": spec.get("attempt", 1),
              "target": spec.get("target"), "target_version": None, "profile": spec.get("profile", "smoke"),
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "mode": None, "hardware": None, "isolation": None, "stages": {},
              "summary": {"geomean_speedup": None, "geomean_ci95": None, "floor_fraction": None}, "verdict": {}}
    stages = _Stages(report, on_progress)
    try:
        _evaluate(spec, report, stages)
    except Exception:
        report["verdict"] = {"status": "error", "complete": False, "reasons": ["harness:exception"],
                             "message": traceback.format_exc()[-4000:]}
    report["wall_s"] = round(time.monotonic() - wall0, 3)
    return _clean(report)


def _evaluate(spec: dict, report: dict, stages: _Stages) -> None:
    try:
        target = get_target(spec.get("target") or "")
    except KeyError as e:
        report["verdict"] = {"status": "error", "complete": False, "reasons": ["spec:unknown_target"],
                             "message": str(e)}
        return
    device = _device()
    mode = "gpu" if device == "cuda" else "cpu"
    profile = spec.get("profile") or "smoke"
    if profile not in ("smoke", "full"):
        profile = "smoke"
    effective = profile if mode == "gpu" else "smoke"
    seed = int(spec["seed"]) if spec.get("seed") is not None else secrets.randbits(63)
    report.update(target_version=target.version, mode=mode, profile=profile, profile_effective=effective,
                  hardware=hardware.fingerprint())
    source = spec.get("source") or ""

    t = stages.start("guard")
    findings, info = check_candidate(source, target)
    stages.end("guard", t, {"status": "fail" if findings else "pass", "findings": findings, "dsl": info["dsl"],
                            "kernels": info["kernels"]})
    if findings:
        for name in ("verify", "benchmark"):
            stages.put(name, {"status": "skipped", "reason": "guard failed"})
        _finish(report, target, stages)
        return

    sweep_stale_scratch()
    scratch_root = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-"))
    os.chmod(scratch_root, 0o711)  # a child running as nobody must traverse it (its own dirs are inside)
    bench = None
    try:
        if mode == "gpu":
            bench = _start_bench_child(spec, target, source, info, effective, seed, scratch_root)
        verify_entry = _verify(spec, report, stages, target, source, info, device, effective, seed, scratch_root)
        if mode == "cpu":
            stages.put("benchmark", {"status": "unavailable", "reason": "timings need a GPU worker"})
        elif verify_entry["status"] != "pass":
            bench.cancel()
            stages.put("benchmark", {"status": "skipped", "reason": "verification failed"})
        else:
            _benchmark(report, stages, target, effective, bench, seed, scratch_root / "bench" / "outputs")
        ctx = {"stages": stages, "scratch_root": scratch_root, "source": source, "spec": spec, "info": info,
               "profile": effective, "seed": seed} if mode == "gpu" else None
        _finish(report, target, stages, ctx)
    finally:
        if bench is not None:
            bench.cancel()  # on every way out, and before its scratch dir goes; a no-op once it has ended
        shutil.rmtree(scratch_root, ignore_errors=True)


def sweep_stale_scratch() -> list[Path]:
    """Remove the scratch dirs of evaluations whose process is gone (a worker killed with SIGKILL leaves its
    `ark-eval-<pid>-*` behind). A dir whose pid is alive, or belongs to a process this one may not signal,
    stays. Returns what was removed."""
    removed = []
    for path in Path(tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}*-*"):
        pid = path.name[len(SCRATCH_PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid() or not path.is_dir():
            continue
        try:
            os.kill(int(pid), 0)
            continue                      # alive
        except ProcessLookupError:
            pass
        except PermissionError:
            continue                      # alive, someone else's
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _child_cfg(target, info, device, mode, shapes, profile, candidate_path, incumbent_path=None) -> dict:
    return {"target": target.name, "device": device, "mode": mode, "shapes": shapes, "profile": profile,
            "dsl": info["dsl"], "kernels": info["kernels"], "candidate_path": str(candidate_path),
            "incumbent_path": str(incumbent_path) if incumbent_path else None}


def _write_source(scratch: Path, name: str, source: str) -> Path:
    path = scratch / "work" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    os.chmod(path, 0o644)
    return path


def _crash_findings(run, stage: str) -> list[dict]:
    if run.cancelled:
        return []  # the harness ended it
    if run.timed_out:
        return [{"code": f"{stage}:timeout", "message": "the child ran past its time limit and was killed "
                 f"with its process group; output tail:\n{run.log_tail[-1500:]}"}]
    if not any(m.get("type") == "done" for m in run.messages):
        rc = run.returncode
        how = f"signal {-rc}" if rc is not None and rc < 0 else f"exit code {rc}"
        return [{"code": f"{stage}:crash", "message": f"the child died ({how}) before finishing; output tail:\n"
                 f"{run.log_tail[-1500:]}"}]
    return []


def _verify_timeout(spec, device, profile) -> float:
    return float(spec.get("verify_timeout_s") or VERIFY_TIMEOUT_S["cpu" if device == "cpu" else profile])


def _verify(spec, report, stages, target, source, info, device, profile, seed, scratch_root) -> dict:
    shapes = target.verify_shapes(profile, seed, device)
    t = stages.start("verify", shapes=len(shapes))
    scratch = scratch_root / "verify"
    scratch.mkdir()
    path = _write_source(scratch, "candidate.py", source)
    cfg = _child_cfg(target, info, device, "verify", shapes, profile, path)
    run = run_child(cfg, secret=str(seed), timeout_s=_verify_timeout(spec, device, profile), scratch=scratch,
                    device=device)
    report["isolation"] = run.protections
    findings: list[dict] = []
    per_shape = []
    load = next((m for m in run.messages if m.get("type") == "load"), None)
    fatal = [m for m in run.messages if m.get("type") == "fatal"]
    for m in fatal:
        findings.append({"code": m.get("code", "harness:fatal"), "message": m.get("message", "")})
    if load and load.get("status") == "fail":
        findings += load.get("findings", [])
    compile_only = False
    msgs = {m["index"]: m for m in run.messages if m.get("type") == "verify_shape"}
    outputs_dir = scratch / "outputs"
    for i, shape in enumerate(shapes):
        m = msgs.get(i)
        entry = {"shape": shape, "pass": False, "max_error": None, "message": "not run"}
        if m is None:
            per_shape.append(entry)
            continue
        shape_findings = list(m.get("findings", []))
        entry.update(seconds=m.get("seconds"), launches=m.get("launches"), kernels=m.get("kernels"), ops=m.get("ops"))
        if m.get("status") == "compile_only":
            compile_only = True
            entry.update(pass_=None, message="compile-only (CuTe DSL on a CPU host): numerics not checked")
            entry["pass"] = None
            entry.pop("pass_")
        elif m.get("status") == "ran" and m.get("files"):
            verdict = referee.judge(target, shape, i, seed, outputs_dir, m["files"], device)
            shape_findings += verdict["findings"]
            entry.update(max_error=verdict["max_error"], message=verdict["message"])
            entry["pass"] = verdict["pass"] and not shape_findings
        else:
            entry["message"] = "; ".join(f["code"] for f in shape_findings) or "did not run"
        if shape_findings:
            entry["pass"] = False
            entry["message"] = f"{shape_findings[0]['code']}: {shape_findings[0]['message'][:300]}"
        for f in shape_findings:
            f = dict(f, shape_index=i)
            findings.append(f)
        per_shape.append(entry)
    if device == "cuda":
        import torch
        torch.cuda.empty_cache()  # the referee's memory goes back before the benchmark's timing starts
    if not findings:
        findings += _crash_findings(run, "verify")
    elif run.timed_out:
        findings += _crash_findings(run, "verify")
    ran_all = all(e["pass"] is not None for e in per_shape)
    if findings or not per_shape:
        status = "fail" if findings else "error"
    elif compile_only and not ran_all:
        status = "compile_only"
    else:
        status = "pass" if all(e["pass"] for e in per_shape) else "fail"
    if status == "fail" and not findings:
        findings.append({"code": "verify:wrong", "message": "a shape did not pass"})
    return stages.end("verify", t, {"status": status, "shapes": per_shape, "findings": _dedupe(findings),
                                    "child_wall_s": round(run.wall_s, 3), "returncode": run.returncode})


def _dedupe(findings: list[dict]) -> list[dict]:
    seen, out = set(), []
    for f in findings:
        key = (f.get("code"), (f.get("message") or "")[:200])
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def _start_bench_child(spec, target, source, info, profile, seed, scratch_root) -> EarlyChild:
    """The benchmark's child, started beside the verify child: its imports, CUDA init and first calls
    (Triton compiles) overlap verification. It gets the seed only through _benchmark's gate, after a
    passing verify stage; a failing one cancels it. Its own scratch dir and Triton cache, as before."""
    scratch = scratch_root / "bench"
    scratch.mkdir()
    path = _write_source(scratch, "candidate.py", source)
    inc_path = _write_source(scratch, "incumbent.py", spec["incumbent_source"]) if spec.get("incumbent_source") else None
    cfg = _child_cfg(target, info, "cuda", "bench", target.benchmark_shapes(profile), profile, path, inc_path)
    # its waiting at the gate does not count against its own timeout, up to verify's (a hard bound)
    return EarlyChild(cfg, secret=str(seed), timeout_s=BENCH_TIMEOUT_S[profile], scratch=scratch, device="cuda",
                      max_gate_wait_s=_verify_timeout(spec, "cuda", profile)).start()


def _benchmark(report, stages, target, profile, child: EarlyChild, seed: int, outputs_dir: Path) -> None:
    shapes = target.benchmark_shapes(profile)
    t = stages.start("benchmark", shapes=len(shapes))  # "seconds" counts from the gate's opening
    clocks_before = hardware.fingerprint()
    child.release()
    run = child.result()
    clocks_after = hardware.fingerprint()
    # what the child did after it got the seed: the timing is all there (the claimed-GPU-time check)
    after_gate_s = run.wall_s - (run.released_s if run.released_s is not None else 0.0)
    warm = next((m for m in run.messages if m.get("type") == "warm"), {})
    ceil = stats.ceilings_for((report.get("hardware") or {}).get("kind"))
    findings, per_shape, summary, claimed_s = bench_results(run.messages, target, ceil, after_gate_s)
    findings += _crash_findings(run, "benchmark") if not any(m.get("type") == "done" for m in run.messages) else []
    timed = shapes + held_out_shapes(target, seed)
    findings += referee.judge_replays(target, timed, seed, outputs_dir, run.messages, "cuda")
    listed = [e for e in per_shape if not e.get("held_out")]
    status = "fail" if findings else ("pass" if listed and len(listed) == len(shapes) else "error")
    report["summary"] = summary
    stages.end("benchmark", t, {"status": status, "shapes": per_shape, "findings": _dedupe(findings),
                                "clocks_before": _clocks(clocks_before), "clocks_after": _clocks(clocks_after),
                                "claimed_gpu_s": round(claimed_s, 4), "ceilings": ceil,
                                # the child started with verify: its whole life, its warm-up, how long it
                                # waited loaded at the gate, and its life after the gate
                                "started_early": True, "child_wall_s": round(run.wall_s, 3),
                                "warm_s": warm.get("seconds"), "gate_wait_s": round(run.gate_wait_s or 0.0, 3),
                                "after_gate_s": round(after_gate_s, 3)})


def _clocks(fp: dict) -> dict:
    return {k: fp.get(k) for k in ("sm_clock_mhz", "mem_clock_mhz", "throttle_reasons")}


def _e2e(report: dict, target, ctx: dict | None, stages: "_Stages") -> None:
    """The e2e gate (gpu_worker.e2e.run_gate) in its own sandboxed child, after a passing benchmark."""
    if target.e2e_slot is None:
        stages.put("e2e", {"status": "skipped", "reason": "no e2e slot for this target"})
        return
    if report["stages"].get("benchmark", {}).get("status") != "pass" or ctx is None:
        stages.put("e2e", {"status": "skipped", "reason": "needs a passing benchmark on a GPU"})
        return
    if ctx["spec"].get("e2e") is False:
        stages.put("e2e", {"status": "skipped", "reason": "not requested (spec e2e: false)"})
        return
    t = ctx["stages"].start("e2e")
    scratch = ctx["scratch_root"] / "e2e"
    scratch.mkdir()
    path = _write_source(scratch, "candidate.py", ctx["source"])
    inc = ctx["spec"].get("incumbent_source")
    inc_path = _write_source(scratch, "incumbent.py", inc) if inc else None
    # the e2e harness keys its grids by hardware kind ("h200"), not by smoke/full
    kind = (report.get("hardware") or {}).get("kind") or "h200"
    cfg = _child_cfg(target, ctx["info"], "cuda", "e2e", [], kind, path, inc_path)
    run = run_child(cfg, secret=str(ctx["seed"]), timeout_s=E2E_TIMEOUT_S, scratch=scratch, device="cuda")
    msg = next((m for m in run.messages if m.get("type") == "e2e"), None)
    if msg is None:
        findings = _crash_findings(run, "e2e") or [{"code": "e2e:no_result", "message": run.log_tail[-1500:]}]
        entry = {"status": "error", "findings": findings}
    else:
        entry = dict(msg["stage"])
        entry.setdefault("findings", [])
    ctx["stages"].end("e2e", t, entry)


def _finish(report: dict, target, stages: "_Stages", ctx: dict | None = None) -> None:
    _e2e(report, target, ctx, stages)
    reasons, status = [], "pass"
    for name in ("guard", "verify", "benchmark", "e2e"):
        st = report["stages"].get(name, {})
        codes = [f["code"] for f in st.get("findings", [])]
        if st.get("status") == "fail":
            status = "fail"
        elif st.get("status") == "error" and status != "fail":
            status = "error"
        for c in codes:
            if c not in reasons:
                reasons.append(c)
    if any(r.startswith("harness:") for r in reasons) and status == "fail":
        status = "error"
    complete = report["stages"].get("benchmark", {}).get("status") == "pass"
    if status == "pass":
        if report["stages"].get("verify", {}).get("status") == "compile_only":
            reasons.append("verify:compile_only")
        if report["stages"].get("benchmark", {}).get("status") == "unavailable":
            reasons.append("benchmark:unavailable")
    report["verdict"] = {"status": status, "complete": complete, "reasons": reasons}
