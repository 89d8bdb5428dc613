"""One candidate through the pipeline: guard, verify, benchmark, e2e, verdict (docs/harness.md).

`Evaluation(spec).run()` returns the report (gpu_worker/contract.py). Each stage is a method that reads
what the evaluation knows so far and returns its stage record; `run` orders them. The multi-process
runner (gpu_worker/distributed/runner.py) extends this class for targets that run in several processes.
"""

from __future__ import annotations

import datetime
import os
import secrets
import shutil
import tempfile
import threading
import time
import traceback
from pathlib import Path

from .. import hardware
from ..contract import (BenchmarkStage, E2EStage, EvaluationSpec, GuardStage, Hardware, Report, Stage, Summary,
                        VerifyStage, Verdict, stage_from_dict)
from ..targets import get_target
from . import ncu, referee, stats
from .bench_child import held_out_shapes
from .bench_report import bench_results
from .guard import check_candidate
from .protocol import candidate_text
from .sandbox import NOBODY, EarlyChild, host_protections, run_child

SCRATCH_PREFIX = "ark-eval-"  # then the evaluating process's pid: sweep_stale_scratch
VERIFY_TIMEOUT_S = {"cpu": 480.0, "smoke": 420.0, "full": 420.0}  # every profile verifies the whole range (docs/verification.md)
BENCH_TIMEOUT_S = {"smoke": 180.0, "full": 420.0}
E2E_TIMEOUT_S = 420.0


def _device() -> str:
    forced = os.environ.get("ARK_DEVICE")
    if forced in ("cpu", "cuda"):
        return forced
    try:
        import torch  # local: only the parent that evaluates asks for CUDA; importing this module does not
        return "cuda" if torch.cuda.is_available() else "cpu"
    except Exception:
        return "cpu"


class StopEvaluation(Exception):
    """The evaluation cannot go on (unknown target, too few GPUs): the verdict says why."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


class Evaluation:
    """One evaluation of one candidate on this worker."""

    scratch_prefix = SCRATCH_PREFIX
    verify_timeouts = VERIFY_TIMEOUT_S

    def __init__(self, spec: EvaluationSpec | dict, *, on_progress=None):
        self.spec = EvaluationSpec.from_dict(spec)
        self.on_progress = on_progress
        self.report = Report(candidate_id=self.spec.candidate_id, target=self.spec.target,
                             attempt=self.spec.attempt, profile=self.spec.profile,
                             date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
        self.target = None
        self.device = "cpu"
        self.profile = "smoke"           # what runs: a CPU worker runs smoke whatever was asked
        self.seed = 0
        self.info: dict = {}             # the guard's findings about the source: its DSL and kernels
        self.scratch_root: Path | None = None
        self._bench_child: EarlyChild | None = None

    @property
    def on_gpu(self) -> bool:
        return self.device == "cuda"

    # ------------------------------------------------------------------ the order of the stages

    def run(self) -> Report:
        """Never raises for a bad candidate: a harness fault becomes an error verdict."""
        wall0 = time.monotonic()
        try:
            self._run()
        except StopEvaluation as stop:
            self.report.verdict = Verdict(status="error", reasons=[stop.reason], message=str(stop))
        except Exception:
            self.report.verdict = Verdict(status="error", reasons=["harness:exception"],
                                          message=traceback.format_exc()[-4000:])
        self.report.wall_s = round(time.monotonic() - wall0, 3)
        return self.report

    def _run(self) -> None:
        self.target = self.load_target()
        self.prepare()
        if self.guard().status != "pass":
            self.skip("verify", "guard failed")
            self.skip("benchmark", "guard failed")
            self.e2e()
            self.verdict()
            return
        self.sweep()
        self.scratch_root = Path(tempfile.mkdtemp(prefix=f"{self.scratch_prefix}{os.getpid()}-"))
        os.chmod(self.scratch_root, 0o711)  # a child running as nobody must traverse it (its own dirs are inside)
        try:
            self._bench_child = self.start_bench_child()
            verify = self.verify()
            if not self.on_gpu:
                self.put("benchmark", {"status": "unavailable", "reason": "timings need a GPU worker"})
            elif verify.status != "pass":
                self.cancel_bench_child()
                self.skip("benchmark", "verification failed")
            else:
                self.benchmark()
                self.counters()
            self.e2e()
        finally:
            self.cancel_bench_child()  # on every way out, and before its scratch dir goes
            shutil.rmtree(self.scratch_root, ignore_errors=True)
        self.verdict()

    # ------------------------------------------------------------------ setting up

    def load_target(self):
        try:
            return get_target(self.spec.target, self.spec.target_document)
        except KeyError as e:
            raise StopEvaluation("spec:unknown_target", str(e)) from None

    def prepare(self) -> None:
        """Device, effective profile and seed; the report's header."""
        self.device = _device()
        self.profile = self.spec.profile if self.on_gpu else "smoke"
        self.seed = self.spec.seed if self.spec.seed is not None else secrets.randbits(63)
        self.report.target_version = self.target.version
        self.report.mode = "gpu" if self.on_gpu else "cpu"
        self.report.profile_effective = self.profile
        self.report.hardware = Hardware.from_dict(hardware.fingerprint(), "hardware")

    def sweep(self) -> None:
        sweep_stale_scratch()

    # ------------------------------------------------------------------ stages

    def guard(self) -> GuardStage:
        t = self.begin("guard")
        findings, self.info = check_candidate(self.spec.source, self.target)
        return self.end("guard", t, {"status": "fail" if findings else "pass", "findings": findings,
                                     "dsl": self.info["dsl"], "kernels": self.info["kernels"]})

    def verify(self) -> VerifyStage:
        shapes = self.target.verify_shapes(self.profile, self.seed, self.device)
        t = self.begin("verify", shapes=len(shapes))
        scratch = self.scratch_root / "verify"
        scratch.mkdir()
        path = write_source(scratch, "candidate.py", self.spec.source)
        cfg = self.child_cfg("verify", shapes, path)
        # Each shape is judged as soon as the child reports it; the first failing shape ends the child, so
        # a wrong candidate does not spend minutes on the rest of the range (CPU hosts interpret Triton).
        judged, stop = {}, threading.Event()

        def judge_now(m: dict) -> None:
            if m.get("type") != "verify_shape" or stop.is_set():
                return
            if m.get("status") == "ran" and m.get("files") and 0 <= m.get("index", -1) < len(shapes):
                try:
                    judged[m["index"]] = referee.judge(self.target, shapes[m["index"]], m["index"], self.seed,
                                                       scratch / "outputs", m["files"], self.device)
                except Exception:  # judged again after the run, where a fault is reported as the harness's
                    return
                if not judged[m["index"]]["pass"]:
                    stop.set()
            if m.get("findings") or m.get("status") == "error":
                stop.set()

        run = run_child(cfg, secret=str(self.seed), timeout_s=self.verify_timeout_s(), scratch=scratch,
                        device=self.device, on_message=judge_now, cancel=stop)
        self.report.isolation = run.protections
        entry = verify_entry(run, self.target, shapes, self.seed, scratch / "outputs", self.device, judged)
        if self.on_gpu:
            import torch  # local: CUDA only in a GPU evaluation
            torch.cuda.empty_cache()  # the referee's memory goes back before the benchmark's timing starts
        return self.end("verify", t, entry)

    def start_bench_child(self) -> EarlyChild | None:
        """The benchmark's child, started beside the verify child: its imports, CUDA init and first calls
        (Triton compiles) overlap verification. It gets the seed only when benchmark() opens its gate,
        after a passing verify stage; anything else cancels it. Its own scratch dir and Triton cache."""
        if not self.on_gpu:
            return None
        scratch = self.scratch_root / "bench"
        scratch.mkdir()
        path = write_source(scratch, "candidate.py", self.spec.source)
        inc = self.spec.incumbent_source
        inc_path = write_source(scratch, "incumbent.py", inc) if inc else None
        cfg = self.child_cfg("bench", self.target.benchmark_shapes(self.profile), path, inc_path)
        # its waiting at the gate does not count against its own timeout, up to verify's (a hard bound)
        return EarlyChild(cfg, secret=str(self.seed), timeout_s=BENCH_TIMEOUT_S[self.profile], scratch=scratch,
                          device="cuda", max_gate_wait_s=self.verify_timeout_s()).start()

    def cancel_bench_child(self) -> None:
        if self._bench_child is not None:
            self._bench_child.cancel()  # a no-op once it has ended

    def benchmark(self) -> BenchmarkStage:
        shapes = self.target.benchmark_shapes(self.profile)
        t = self.begin("benchmark", shapes=len(shapes))  # "seconds" counts from the gate's opening
        child = self._bench_child
        clocks_before = hardware.fingerprint()
        child.release()
        run = child.result()
        clocks_after = hardware.fingerprint()
        # what the child did after it got the seed: the timing is all there (the claimed-GPU-time check)
        after_gate_s = run.wall_s - (run.released_s if run.released_s is not None else 0.0)
        warm = next((m for m in run.messages if m.get("type") == "warm"), {})
        ceil = stats.ceilings_for(self.report.hardware.kind if self.report.hardware else None)
        findings, per_shape, summary, claimed_s = bench_results(run.messages, self.target, ceil, after_gate_s)
        if not any(m.get("type") == "done" for m in run.messages):
            findings += crash_findings(run, "benchmark")
        timed = shapes + held_out_shapes(self.target, self.seed)
        outputs = self.scratch_root / "bench" / "outputs"
        findings += referee.judge_replays(self.target, timed, self.seed, outputs, run.messages, "cuda")
        listed = [e for e in per_shape if not e.get("held_out")]
        status = "fail" if findings else ("pass" if listed and len(listed) == len(shapes) else "error")
        self.report.summary = Summary.from_dict(summary, "summary")
        return self.end("benchmark", t, {
            "status": status, "shapes": per_shape, "findings": dedupe(findings),
            "clocks_before": clocks(clocks_before), "clocks_after": clocks(clocks_after),
            "claimed_gpu_s": round(claimed_s, 4), "ceilings": ceil,
            # the child started with verify: its whole life, its warm-up, how long it waited loaded at
            # the gate, and its life after the gate
            "started_early": True, "child_wall_s": round(run.wall_s, 3), "warm_s": warm.get("seconds"),
            "gate_wait_s": round(run.gate_wait_s or 0.0, 3), "after_gate_s": round(after_gate_s, 3)})

    def counters(self) -> None:
        """Nsight Compute's counters for the candidate at one listed shape, where the host has ncu, after a
        passing benchmark: into that shape's profile as `ncu` (pipeline/ncu.py). Context, never scored; a
        failure is written there and changes no verdict."""
        bench = self.report.stages.benchmark
        tool = ncu.find()
        if tool is None or bench is None or bench.status != "pass":
            return
        shapes = self.target.benchmark_shapes(self.profile)
        index = ncu.shape_for(self.target, shapes)
        entry = next((e for e in bench.shapes or [] if e.shape == shapes[index] and not e.held_out), None)
        if entry is None:
            return
        # The benchmark child's scratch dir, whose Triton cache holds the candidate's compiled kernels; the
        # source goes beside it, not into its work dir, where that child could have left a link to follow.
        scratch = self.scratch_root / "bench"
        scratch.mkdir(exist_ok=True)
        path = write_source(self.scratch_root / "ncu", "candidate.py", self.spec.source)
        uid = NOBODY if host_protections()["uid_drop"] else None
        csv_path = ncu.output_dir(self.scratch_root, uid) / "ncu.csv"
        run = run_child(self.child_cfg("ncu", [shapes[index]], path), secret=str(self.seed),
                        timeout_s=ncu.TIMEOUT_S, scratch=scratch, device="cuda", wrap=ncu.argv(tool, csv_path, uid))
        text = ncu.read_output(csv_path, uid)
        kernels = ncu.summarize(ncu.parse(text))
        result = {"shape": shapes[index], "kernels": kernels, "seconds": round(run.wall_s, 1)}
        if not kernels:
            result["error"] = candidate_text("no kernel was profiled: " + (text[-300:] or run.log_tail[-300:]), 400)
        entry.profile = dict(entry.profile or {}, ncu=result)

    def e2e(self) -> E2EStage:
        """The e2e gate (gpu_worker.e2e.run_gate) in its own sandboxed child, after a passing benchmark."""
        bench = self.report.stages.benchmark
        if self.target.e2e_slot is None:
            return self.skip("e2e", "no e2e slot for this target")
        if bench is None or bench.status != "pass" or not self.on_gpu or self.scratch_root is None:
            return self.skip("e2e", "needs a passing benchmark on a GPU")
        if not self.spec.e2e:
            return self.skip("e2e", "not requested (spec e2e: false)")
        t = self.begin("e2e")
        scratch = self.scratch_root / "e2e"
        scratch.mkdir()
        path = write_source(scratch, "candidate.py", self.spec.source)
        inc = self.spec.incumbent_source
        inc_path = write_source(scratch, "incumbent.py", inc) if inc else None
        # the e2e harness keys its grids by hardware kind ("h200"), not by smoke/full
        kind = (self.report.hardware.kind if self.report.hardware else None) or "h200"
        cfg = dict(self.child_cfg("e2e", [], path, inc_path, profile=kind), routes=self.spec.e2e_routes)
        run = run_child(cfg, secret=str(self.seed), timeout_s=E2E_TIMEOUT_S, scratch=scratch, device="cuda")
        msg = next((m for m in run.messages if m.get("type") == "e2e"), None)
        if msg is None:
            findings = crash_findings(run, "e2e") or [{"code": "e2e:no_result", "message": run.log_tail[-1500:]}]
            return self.end("e2e", t, {"status": "error", "findings": findings})
        return self.end("e2e", t, dict(msg["stage"]))

    def verdict(self) -> Verdict:
        """Whether the harness accepts the candidate: the worst stage status, every finding's code."""
        reasons, status = [], "pass"
        stages = [self.report.stage(name) for name in ("guard", "verify", "benchmark", "e2e")]
        for stage in (s for s in stages if s is not None):
            if stage.status == "fail":
                status = "fail"
            elif stage.status == "error" and status != "fail":
                status = "error"
            reasons += [code for code in stage.codes if code not in reasons]
        if status == "fail" and any(r.startswith("harness:") for r in reasons):
            status = "error"
        verify, bench = self.report.stages.verify, self.report.stages.benchmark
        if status == "pass":
            if verify is not None and verify.status == "compile_only":
                reasons.append("verify:compile_only")
            if bench is not None and bench.status == "unavailable":
                reasons.append("benchmark:unavailable")
        self.report.verdict = Verdict(status=status, complete=bench is not None and bench.status == "pass",
                                      reasons=reasons)
        return self.report.verdict

    # ------------------------------------------------------------------ helpers the stages share

    def child_cfg(self, mode: str, shapes: list, candidate_path: Path, incumbent_path: Path | None = None,
                  profile: str | None = None) -> dict:
        return {"target": self.target.name, "target_document": self.spec.target_document,
                "device": self.device, "mode": mode,
                "shapes": shapes, "profile": profile or self.profile, "dsl": self.info["dsl"],
                "kernels": self.info["kernels"], "candidate_path": str(candidate_path),
                "incumbent_path": str(incumbent_path) if incumbent_path else None}

    def verify_timeout_s(self) -> float:
        return float(self.spec.verify_timeout_s or self.verify_timeouts[self.profile if self.on_gpu else "cpu"])

    def begin(self, name: str, **detail) -> float:
        self._notify(name, "running", detail)
        return time.monotonic()

    def end(self, name: str, t0: float, entry: dict) -> Stage:
        stage = self.put(name, dict(entry, seconds=round(time.monotonic() - t0, 3)), announce=False)
        self._notify(name, stage.status, {"findings": stage.codes})
        return stage

    def skip(self, name: str, reason: str) -> Stage:
        return self.put(name, {"status": "skipped", "reason": reason})

    def put(self, name: str, entry: dict, announce: bool = True) -> Stage:
        """Record a stage, built through the contract (an undeclared field fails here), and announce it."""
        stage = stage_from_dict(name, entry)
        setattr(self.report.stages, name, stage)
        if announce:
            self._notify(name, stage.status, {"reason": stage.reason})
        return stage

    def _notify(self, stage: str, status: str, detail: dict) -> None:
        if self.on_progress:
            try:
                self.on_progress(stage, status, detail)
            except Exception:
                pass  # progress is a courtesy; the report is what counts


# ---------------------------------------------------------------------- functions of one input


def sweep_stale_scratch(prefix: str = SCRATCH_PREFIX) -> list[Path]:
    """Remove the scratch dirs of evaluations whose process is gone (a worker killed with SIGKILL leaves its
    `<prefix><pid>-*` behind). A dir whose pid is alive, or belongs to a process this one may not signal,
    stays. Returns what was removed."""
    removed = []
    for path in Path(tempfile.gettempdir()).glob(f"{prefix}*-*"):
        pid = path.name[len(prefix):].split("-", 1)[0]
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


def write_source(scratch: Path, name: str, source: str) -> Path:
    path = scratch / "work" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    os.chmod(path, 0o644)
    return path


def crash_findings(run, stage: str) -> list[dict]:
    """Why a child ended without finishing: timed out, or died; nothing when the harness cancelled it."""
    if run.cancelled:
        return []
    if run.timed_out:
        return [{"code": f"{stage}:timeout", "message": "the child ran past its time limit and was killed "
                 f"with its process group; output tail:\n{run.log_tail[-1500:]}"}]
    if not any(m.get("type") == "done" for m in run.messages):
        rc = run.returncode
        how = f"signal {-rc}" if rc is not None and rc < 0 else f"exit code {rc}"
        return [{"code": f"{stage}:crash", "message": f"the child died ({how}) before finishing; output tail:\n"
                 f"{run.log_tail[-1500:]}"}]
    return []


def verify_entry(run, target, shapes: list, seed: int, outputs_dir: Path, device: str,
                 judged: dict | None = None) -> dict:
    """The verify stage from the verify child's messages: each shape judged by the referee (`judged`: the
    shapes already judged while the child ran). Shapes after the first failing one are "not run": the
    child was stopped there."""
    judged = judged or {}
    findings: list[dict] = []
    for m in run.messages:
        if m.get("type") == "fatal":
            findings.append({"code": m.get("code", "harness:fatal"), "message": m.get("message", "")})
        elif m.get("type") == "load" and m.get("status") == "fail":
            findings += m.get("findings", [])
    msgs = {m["index"]: m for m in run.messages if m.get("type") == "verify_shape"}
    per_shape, compile_only = [], False
    for i, shape in enumerate(shapes):
        entry, shape_findings = {"shape": shape, "pass": False, "max_error": None, "message": "not run"}, []
        m = msgs.get(i)
        if m is not None:
            shape_findings = list(m.get("findings", []))
            entry.update(seconds=m.get("seconds"), launches=m.get("launches"), kernels=m.get("kernels"),
                         ops=m.get("ops"))
            if m.get("status") == "compile_only":
                compile_only = True
                entry.update({"pass": None, "message": "compile-only (CuTe DSL on a CPU host): numerics not checked"})
            elif m.get("status") == "ran" and m.get("files"):
                verdict = judged.get(i) or referee.judge(target, shape, i, seed, outputs_dir, m["files"], device)
                shape_findings += verdict["findings"]
                entry.update({"max_error": verdict["max_error"], "message": verdict["message"],
                              "pass": verdict["pass"] and not shape_findings})
            else:
                entry["message"] = "; ".join(f["code"] for f in shape_findings) or "did not run"
            if shape_findings:
                entry["pass"] = False
                entry["message"] = f"{shape_findings[0]['code']}: {shape_findings[0]['message'][:300]}"
        findings += [dict(f, shape_index=i) for f in shape_findings]
        per_shape.append(entry)
    if not findings or run.timed_out:
        findings += crash_findings(run, "verify")
    if findings or not per_shape:
        status = "fail" if findings else "error"
    elif compile_only and not all(e["pass"] is not None for e in per_shape):
        status = "compile_only"
    else:
        status = "pass" if all(e["pass"] for e in per_shape) else "fail"
    if status == "fail" and not findings:
        findings.append({"code": "verify:wrong", "message": "a shape did not pass"})
    return {"status": status, "shapes": per_shape, "findings": dedupe(findings),
            "child_wall_s": round(run.wall_s, 3), "returncode": run.returncode}


def dedupe(findings: list[dict]) -> list[dict]:
    seen, out = set(), []
    for f in findings:
        key = (f.get("code"), (f.get("message") or "")[:200])
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def clocks(fp: dict) -> dict:
    return {k: fp.get(k) for k in ("sm_clock_mhz", "mem_clock_mhz", "throttle_reasons")}
