"""The child runs isolated; a runaway or crashing candidate ends in a finding, never in a dead worker."""

import importlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gpu_worker.pipeline import evaluate, sandbox
from gpu_worker.pipeline.sandbox import ChildRun, EarlyChild, host_protections, run_child
from tests.conftest import wait_until
from tests.redteam.catalog import source as redteam_source

evaluate_module = importlib.import_module("gpu_worker.pipeline.evaluate")  # the package's `evaluate` is the function

ROOT = Path(__file__).resolve().parents[2]
HONEST = redteam_source("honest_topk_bisect")
SMALL_SHAPE = {"rows": 2, "n_ctx": 1000, "k": 2048, "values": "normal", "lengths": "ragged"}


def _cfg(path, **extra):
    return {"target": "dsa_topk", "device": "cpu", "mode": "verify", "profile": "smoke", "dsl": "triton",
            "kernels": ["_select_kernel"], "candidate_path": str(path), "shapes": [], **extra}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead
        return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_a_hung_candidate_is_killed_with_its_whole_process_group(tmp_path):
    # run_child does not run the guard, so this candidate may fork: the grandchild must die too
    (tmp_path / "work").mkdir()
    cand = tmp_path / "work" / "hang.py"
    cand.write_text("import os, sys, time\npid = os.fork()\nif pid == 0:\n    time.sleep(600)\n"
                    "print('GRANDCHILD', pid, flush=True)\nwhile True:\n    time.sleep(1)\n")
    t0 = time.monotonic()
    run = run_child(_cfg(cand), secret="1", timeout_s=12, scratch=tmp_path, device="cpu")
    assert run.timed_out and time.monotonic() - t0 < 60
    assert "GRANDCHILD" in run.log_tail
    # the pid it printed is its own namespace's where the child has one: find it by its cwd instead
    wait_until(lambda: not _in_dir(tmp_path / "work"), timeout_s=10)


def test_a_child_that_outlives_sigkill_ends_the_run_with_a_finding(tmp_path, monkeypatch):
    # A process in an uninterruptible wait (a GPU driver call on a hung device) outlives SIGKILL. Stand in for
    # one: the kill is taken away, so the hung child stays alive; the run must still end, bounded, and say why.
    (tmp_path / "work").mkdir()
    cand = tmp_path / "work" / "stuck.py"
    cand.write_text("import time\nwhile True:\n    time.sleep(1)\n")
    spared, kill_group = [], sandbox._kill_group
    monkeypatch.setattr(sandbox, "_kill_group", spared.append)
    monkeypatch.setattr(sandbox, "REAP_TIMEOUT_S", 2.0)
    t0 = time.monotonic()
    try:
        run = run_child(_cfg(cand), secret="1", timeout_s=8, scratch=tmp_path, device="cpu")
        assert run.timed_out and time.monotonic() - t0 < 40
        assert run.returncode is None
        unreaped = [m for m in run.messages if m.get("code") == "harness:unreaped"]
        assert len(unreaped) == 1 and "SIGKILL" in unreaped[0]["message"]
        findings = evaluate_module.verify_entry(run, None, [], 0, tmp_path, "cpu")["findings"]
        assert "harness:unreaped" in [f["code"] for f in findings]
    finally:
        # the sandbox's sweep of marked processes may already have killed and reaped it: tolerate a gone group
        for pgid in spared:
            kill_group(pgid)
    wait_until(lambda: not _in_dir(tmp_path / "work"), timeout_s=10)


def _in_dir(path: Path) -> list[int]:
    """Live processes whose working directory is `path`."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and _alive(int(name)):
            try:
                if os.readlink(f"/proc/{name}/cwd") == str(path):
                    found.append(int(name))
            except OSError:
                continue
    return found


@pytest.mark.slow
def test_a_candidate_that_kills_its_process_leaves_a_crash_finding(tmp_path):
    (tmp_path / "work").mkdir()
    cand = tmp_path / "work" / "crash.py"
    cand.write_text("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    run = run_child(_cfg(cand), secret="1", timeout_s=60, scratch=tmp_path, device="cpu")
    assert run.returncode == -11 and not run.timed_out
    assert [m["type"] for m in run.messages] == ["hello"]


@pytest.mark.slow
def test_the_child_gets_an_explicit_environment_and_the_isolation_is_recorded(tmp_path, monkeypatch):
    monkeypatch.setenv("ARK_SECRET_OF_THE_WORKER", "do-not-leak")
    (tmp_path / "work").mkdir()
    cand = tmp_path / "work" / "env.py"
    cand.write_text("import os, json\nprint('ENV', json.dumps(sorted(os.environ)), 'UID', os.getuid(), flush=True)\n"
                    "def forward(*a):\n    pass\n")
    run = run_child(_cfg(cand), secret="1", timeout_s=60, scratch=tmp_path, device="cpu")
    env = json.loads(run.log_tail.split("ENV ")[1].split(" UID")[0])
    assert "ARK_SECRET_OF_THE_WORKER" not in env and "TRITON_INTERPRET" in env
    prot = host_protections()
    assert run.protections["network_namespace"] == prot["netns"]
    if prot["uid_drop"]:
        assert int(run.log_tail.split("UID ")[1].split()[0]) == 65534
    hello = run.messages[0]
    assert hello["type"] == "hello" and hello["limits"]["RLIMIT_CORE"] == 0


def _verdict(report: dict) -> dict:
    """The verdict's outcome (its message field is free text, checked by the contract's own tests)."""
    return {key: report["verdict"][key] for key in ("status", "complete", "reasons")}


@pytest.mark.slow
def test_evaluate_reports_an_import_error_and_a_missing_forward_as_findings(few_verify_shapes):
    src = HONEST
    report = evaluate({"candidate_id": "x", "target": "dsa_topk", "profile": "smoke",
                       "source": src.replace("PARAMS = {", "raise RuntimeError('boom')\nPARAMS = {")})
    assert report["verdict"]["status"] == "fail"
    assert "verify:import_error" in report["verdict"]["reasons"]
    assert "boom" in report["stages"]["verify"]["findings"][0]["message"]


@pytest.mark.slow
def test_an_honest_candidate_passes_and_the_report_has_the_contract_fields(few_verify_shapes):
    report = evaluate({"candidate_id": "c1", "attempt": 2, "target": "dsa_topk", "profile": "smoke",
                       "source": HONEST, "seed": 1234})
    assert report["schema"] == "ark.report/2"
    assert (report["candidate_id"], report["attempt"], report["target_version"]) == ("c1", 2, 1)
    assert report["mode"] == "cpu" and report["hardware"]["kind"] == "cpu"
    assert _verdict(report) == {"status": "pass", "complete": False, "reasons": ["benchmark:unavailable"]}
    verify = report["stages"]["verify"]
    assert verify["status"] == "pass" and all(s["pass"] for s in verify["shapes"])
    assert any(s["shape"]["n_ctx"] < 2048 for s in verify["shapes"])  # pads exercised
    bench = report["stages"]["benchmark"]
    assert {k: bench.get(k) for k in ("status", "reason", "findings", "seconds")} == {
        "status": "unavailable", "reason": "timings need a GPU worker", "findings": [], "seconds": 0.0}
    assert not bench.get("shapes")  # nothing timed on a CPU host
    assert report["stages"]["e2e"]["status"] == "skipped"
    assert report["isolation"]["spawned"] and report["isolation"]["explicit_env"]
    json.dumps(report, allow_nan=False)


def test_a_bad_target_name_is_an_error_report_not_an_exception():
    report = evaluate({"candidate_id": "x", "target": "nope", "source": ""})
    assert report["verdict"]["status"] == "error" and report["verdict"]["reasons"] == ["spec:unknown_target"]


def test_the_guard_stops_a_candidate_before_any_child_runs():
    report = evaluate({"candidate_id": "x", "target": "dsa_topk", "source": "def forward(:\n"})
    assert _verdict(report) == {"status": "fail", "complete": False, "reasons": ["guard:syntax"]}
    assert report["stages"]["verify"]["status"] == "skipped"


def test_gpu_worker_pipeline_imports_without_django():
    code = "import sys; sys.modules['django'] = None; import gpu_worker.pipeline, gpu_worker.targets, gpu_worker.cli"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=120)


@pytest.mark.slow
def test_the_child_dies_when_the_worker_is_killed(tmp_path):
    (tmp_path / "work").mkdir()
    cand = tmp_path / "work" / "hang.py"
    cand.write_text("while True:\n    pass\n")
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from gpu_worker.pipeline.sandbox import run_child\n"
        f"cfg = {_cfg(cand)!r}\n"
        "run_child(cfg, secret='1', timeout_s=300, scratch=Path(sys.argv[1]), device='cpu',\n"
        "          on_message=lambda m: print('CHILD', m.get('pid'), flush=True) if m['type'] == 'hello' else None)\n")
    worker = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    worker.stdout.readline()  # the child said hello (its pid there is its namespace's, where it has one)
    try:
        assert _in_dir(tmp_path / "work")
        worker.kill()
        worker.wait()
        wait_until(lambda: not _in_dir(tmp_path / "work"), timeout_s=10)
    finally:
        for pid in _in_dir(tmp_path / "work"):
            os.kill(pid, 9)


@pytest.fixture
def start_gated(tmp_path):
    """Starts an EarlyChild in verify mode on CPU; returns it, an event set when its "load" message
    arrives, and the first message of each type with its arrival time. Cancelled at teardown."""
    children = []

    def start(source: str):
        (tmp_path / "work").mkdir()
        cand = tmp_path / "work" / "cand.py"
        cand.write_text(source)
        loaded, seen = threading.Event(), {}

        def on_message(m):
            seen.setdefault(m["type"], (time.monotonic(), m))
            if m["type"] == "load":
                loaded.set()

        child = EarlyChild(_cfg(cand, shapes=[SMALL_SHAPE]), secret="1", timeout_s=120, max_gate_wait_s=60,
                           scratch=tmp_path, device="cpu", on_message=on_message).start()
        children.append(child)
        return child, loaded, seen

    yield start
    for child in children:
        child.cancel()  # a no-op for one that has ended


@pytest.mark.slow
def test_a_gated_child_gets_its_secret_only_when_the_gate_opens(start_gated):
    child, loaded, seen = start_gated("def forward(*args):\n    return None\n")
    assert loaded.wait(120)
    # a secret sent with "load" would bring the tiny shape's result back well within half a second
    with pytest.raises(AssertionError, match="condition not met"):
        wait_until(lambda: "verify_shape" in seen, timeout_s=0.5, interval_s=0.02)
    opened = time.monotonic()
    child.release()
    run = child.result()
    assert "verify_shape" in seen and seen["verify_shape"][0] > opened
    assert run.gate_wait_s >= 0.5 and not run.timed_out and not run.cancelled
    assert run.released_s >= seen["load"][1]["_received_s"] + 0.5


@pytest.mark.slow
def test_cancel_kills_a_child_waiting_at_its_gate_and_what_it_forked(start_gated, tmp_path):
    # run_child does not run the guard: the candidate forks a grandchild that leaves the process group
    child, loaded, seen = start_gated("import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(600)\n"
                                      "    os._exit(0)\ndef forward(*args):\n    return None\n")
    assert loaded.wait(120)
    t0 = time.monotonic()
    child.cancel()
    run = child.result()
    assert time.monotonic() - t0 < 5
    assert run.cancelled and not run.timed_out and run.released_s is None
    if not run.protections.get("pid_namespace"):  # in its own PID namespace it died with the namespace
        assert run.protections.get("escaped_processes_killed", 0) >= 1
    wait_until(lambda: not _in_dir(tmp_path / "work"), timeout_s=10)  # killed: gone once the kernel reaps it
    assert evaluate_module.crash_findings(run, "benchmark") == []


class _FakeBenchChild:
    """Stands in for run_child behind EarlyChild: waits (bounded) for the gate or the cancel."""

    def __init__(self):
        self.started = threading.Event()
        self.calls = {}

    def __call__(self, cfg, *, secret, timeout_s, scratch, device, on_message, gate, cancel, max_gate_wait_s):
        self.gate, self.cancel = gate, cancel
        self.calls.update(cfg=cfg, secret=secret, max_gate_wait_s=max_gate_wait_s)
        self.started.set()
        deadline = time.monotonic() + 10
        while not (gate.is_set() or cancel.is_set()) and time.monotonic() < deadline:
            gate.wait(0.01)  # wakes at once when the gate opens; a cancel is seen within 10 ms
        if cancel.is_set():
            time.sleep(0.2)  # a slow kill: the scratch dir must outlive it
            self.calls["scratch_alive"] = scratch.exists()
            return ChildRun(cancelled=True)
        if not gate.is_set():
            return ChildRun(timed_out=True)
        return ChildRun(messages=[{"type": "warm", "seconds": 1.5}, {"type": "done"}], wall_s=30.0, released_s=20.0,
                        gate_wait_s=3.0)


@pytest.fixture
def gpu_plumbing(monkeypatch):
    """evaluate on a pretend GPU: the verify stage's outcome is the test's, the bench child is fake."""
    fake = _FakeBenchChild()
    outcome = {}

    def verify(self):
        assert fake.started.wait(10)  # the bench child was started before verify ran
        t = self.begin("verify")
        outcome["gate_or_cancel_during_verify"] = fake.gate.is_set() or fake.cancel.is_set()
        if outcome["status"] == "raise":
            raise RuntimeError("referee broke")
        return self.end("verify", t, {"status": outcome["status"]})

    monkeypatch.setattr(evaluate_module, "_device", lambda: "cuda")
    monkeypatch.setattr(evaluate_module.Evaluation, "verify", verify)
    monkeypatch.setattr(sandbox, "run_child", fake)

    def run(status):
        outcome["status"] = status
        report = evaluate({"candidate_id": "x", "target": "dsa_topk", "source": HONEST, "seed": 7})
        assert not outcome["gate_or_cancel_during_verify"]
        return report, fake
    return run


def test_a_passing_verify_opens_the_early_bench_childs_gate(gpu_plumbing):
    report, fake = gpu_plumbing("pass")
    assert fake.calls["secret"] == "7" and fake.calls["cfg"]["mode"] == "bench" and fake.calls["max_gate_wait_s"] > 0
    assert fake.gate.is_set() and "scratch_alive" not in fake.calls  # it ran to its end, not cancelled
    bench = report["stages"]["benchmark"]
    assert bench["started_early"] is True
    assert (bench["child_wall_s"], bench["after_gate_s"], bench["gate_wait_s"], bench["warm_s"]) == (30.0, 10.0, 3.0, 1.5)


@pytest.mark.parametrize("status", ["fail", "compile_only", "raise"])
def test_a_verify_that_does_not_pass_cancels_the_early_bench_child(gpu_plumbing, status):
    report, fake = gpu_plumbing(status)
    assert fake.cancel.is_set() and not fake.gate.is_set()
    assert fake.calls["scratch_alive"]  # cancelled and joined before the scratch dir went
    if status == "raise":
        assert report["verdict"]["reasons"] == ["harness:exception"]
    else:
        assert report["stages"]["benchmark"]["status"] == "skipped"


def test_the_scratch_dirs_of_dead_evaluators_are_swept_and_live_ones_kept(tmp_path, monkeypatch):
    import subprocess
    import sys
    import tempfile

    from gpu_worker.pipeline.evaluate import sweep_stale_scratch

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        gone = tmp_path / f"ark-eval-{dead.pid}-abc"
        kept = [tmp_path / f"ark-eval-{live.pid}-def", tmp_path / f"ark-eval-{os.getpid()}-ghi",
                tmp_path / "ark-eval-oldstyle", tmp_path / "other-123-x"]
        for d in [gone, *kept]:
            (d / "work").mkdir(parents=True)
        assert sweep_stale_scratch() == [gone]
        assert not gone.exists() and all(d.exists() for d in kept)
    finally:
        live.kill()
        live.wait()
