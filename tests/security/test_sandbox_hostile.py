"""Hostile candidates, run through the real pipeline (guard, sandboxed child, referee) in CPU mode.

Each one is written to get past the static guard (torch's own `os`, builtins through `dataclasses`,
names as strings for `operator.attrgetter`, the stack through `dataclasses.inspect`), so what is
tested is the sandbox around the child, not the guard. Each test checks that the effect did not
happen, not only what the report says."""

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from gpu_worker.pipeline import evaluate

HOSTILE = Path(__file__).parent / "hostile"
# What is tested is the sandbox, which a hostile child meets on its first shape: three shapes do.
pytestmark = pytest.mark.usefixtures("few_verify_shapes")


def _source(name: str, **placeholders) -> str:
    source = (HOSTILE / name).read_text()
    for key, value in placeholders.items():
        source = source.replace(f"__{key}__", str(value))
    return source


@pytest.fixture(autouse=True)
def _guard_bypassed(monkeypatch):
    """The guard stops every file here (test_the_guard_stops_every_hostile_candidate); these tests take it
    away to show what the sandbox and the referee do on their own, the layer a guard gap falls through to."""
    pipeline = sys.modules["gpu_worker.pipeline.evaluate"]  # the module (the package exports the function)
    real = pipeline.check_candidate
    monkeypatch.setattr(pipeline, "check_candidate", lambda source, target: ([], real(source, target)[1]))


@pytest.mark.parametrize("name", sorted(p.name for p in HOSTILE.glob("*.py")))
def test_the_guard_stops_every_hostile_candidate(name, monkeypatch):
    from gpu_worker.pipeline import guard
    from gpu_worker.targets import get_target

    monkeypatch.undo()
    findings, _ = guard.check_candidate(_source(name, PORT=1, PID=1, WATCH_A="/tmp/a", WATCH_B="/tmp/b"),
                                        get_target("dsa_topk"))
    assert findings, f"{name} passes the guard"


def _evaluate(name: str, **placeholders) -> dict:
    source = _source(name, **placeholders)
    spec = {
        "candidate_id": name,
        "attempt": 1,
        "target": "dsa_topk",
        "source": source,
        "incumbent_source": None,
        "profile": "smoke",
        "verify_timeout_s": 60,
    }
    report = evaluate(spec)
    assert report["stages"]["guard"]["status"] == "pass", "the candidate should reach the sandbox"
    return report


class _Listener:
    """A loopback TCP server that counts connections and bytes (bounded: 5 s accept timeout)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.5)
        self.port = self.sock.getsockname()[1]
        self.connections, self.received = 0, b""
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.settimeout(1)
            try:
                self.received += conn.recv(1024)
            except OSError:
                pass
            conn.close()

    def close(self):
        self.stop.set()
        self.thread.join(5)
        self.sock.close()


@pytest.mark.slow
def test_a_candidate_cannot_reach_a_server_on_the_workers_loopback():
    listener = _Listener()
    try:
        report = _evaluate("net_loopback.py", PORT=listener.port)
    finally:
        listener.close()
    assert listener.connections == 0 and listener.received == b""
    assert report["isolation"]["network_namespace"] is True


@pytest.mark.slow
def test_a_candidate_cannot_write_outside_its_scratch_folder(tmp_path):
    watch_a, watch_b = tmp_path / "written-by-torch-os.txt", tmp_path / "written-by-open.txt"
    report = _evaluate("write_outside.py", WATCH_A=watch_a, WATCH_B=watch_b)
    assert not watch_a.exists() and not watch_b.exists(), report["isolation"]
    assert report["isolation"]["landlock"]["applied"] is True


@pytest.mark.slow
def test_a_candidate_cannot_read_the_workers_environment(tmp_path):
    """The worker is a process of its own here (the CLI), started with the secret in its environment,
    so that /proc/<worker>/environ really held it (os.environ changes in a running process do not). Where
    the child cannot be dropped to nobody (here: root), Landlock and a non-dumpable worker did not stop
    the read (seen); the worker now zeroes its original environment block at start
    (sandbox.scrub_environ_block). Not covered: a same-uid root child reading the worker's heap through
    /proc/<pid>/mem (ptrace rules allow it); dropping the uid is what closes that."""
    secret = "ark-db-password-" + os.urandom(8).hex()
    source = (HOSTILE / "read_worker_env.py").read_text().replace("__NAME__", "ARK_TEST_DATABASE_PASSWORD")
    (tmp_path / "cand.py").write_text(source)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(ARK_TEST_DATABASE_PASSWORD=secret, DATABASE_URL=f"postgres://ark:{secret}@127.0.0.1/ark")
    # the CLI's own main (it scrubs the environment block), with the guard taken away as in _guard_bypassed
    run_cli = ("import sys, gpu_worker.pipeline.evaluate; p = sys.modules['gpu_worker.pipeline.evaluate']; "
               "real = p.check_candidate; "
               "p.check_candidate = lambda s, t: ([], real(s, t)[1]); from gpu_worker.cli import main; "
               "from tests.conftest import verify_two_smallest_shapes; verify_two_smallest_shapes(); "
               "sys.exit(main(sys.argv[1:]))")
    proc = subprocess.run(
        [sys.executable, "-c", run_cli, "evaluate", "--target", "dsa_topk", "--candidate", str(tmp_path / "cand.py"),
         "--profile", "smoke", "--out", str(tmp_path / "report.json")],
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=180,
        cwd=Path(__file__).parents[2],
    )
    report = (tmp_path / "report.json").read_text()
    assert json.loads(report)["stages"]["guard"]["status"] == "pass"
    for text in (report, proc.stdout, proc.stderr):
        assert secret not in text


@pytest.mark.slow
def test_a_candidate_cannot_signal_a_process_outside_the_sandbox():
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    try:
        _evaluate("kill_other.py", PID=sleeper.pid)
        assert sleeper.poll() is None, f"the sleeper died: {sleeper.returncode}"
        os.kill(sleeper.pid, 0)
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.slow
def test_fake_pass_messages_on_stdout_stderr_and_fds_do_not_make_a_wrong_kernel_pass():
    report = _evaluate("forge_naive.py")
    # a fail, not a pass, and not a harness error either (a forged "load" line once crashed the worker's loop)
    assert report["verdict"]["status"] == "fail", report["verdict"]
    assert report["stages"]["verify"]["status"] == "fail"


@pytest.mark.slow
def test_a_candidate_that_forges_the_verify_conversation_from_inside_does_not_pass():
    """With the guard taken away, the candidate takes the seed and the result writer from the harness's frame
    and writes a clean conversation. It still fails: the parent judges every run of the shared plan
    (referee.RUNS) from output files it names itself, whatever the child's messages claim, and recomputes the
    inputs from the seed; a forged "pass" without those outputs is verify:missing_output (docs/isolation.md)."""
    report = _evaluate("forge_referee.py")
    assert report["verdict"]["status"] != "pass", report["verdict"]


@pytest.mark.slow
def test_a_file_left_in_dev_shm_does_not_outlive_the_child():
    token = os.urandom(8).hex()
    report = _evaluate("shm_stash.py", TOKEN=token)
    assert not Path(f"/dev/shm/ark-hostile-{token}").exists()
    iso = report["isolation"]
    assert iso["private_shm"] or iso["shm_files_removed"] >= 1, iso


@pytest.mark.slow
def test_a_password_file_read_into_an_exception_does_not_reach_the_report(tmp_path):
    salt, digest = os.urandom(6).hex(), os.urandom(24).hex()
    shadow = tmp_path / "shadow"
    shadow.write_text(f"ark:$6${salt}${digest}:19000:0:99999:7:::\n")
    shadow.chmod(0o644)
    tmp_path.chmod(0o755)
    report = json.dumps(_evaluate("shadow_leak.py", SHADOW=shadow))
    assert digest not in report and salt not in report
    try:
        real = [line.split(":")[1] for line in Path("/etc/shadow").read_text().splitlines() if line.count(":") >= 8]
    except OSError:
        real = []
    for hashed in real:
        if len(hashed) > 8:
            assert hashed not in report
    assert "candidate text" in report  # what came from the child is marked as such


@pytest.mark.slow
def test_a_candidate_sees_no_other_process_where_the_child_has_its_own_pid_namespace():
    token = "ark-visible-" + os.urandom(6).hex()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", token], start_new_session=True)
    try:
        report = _evaluate("proc_others.py")
    finally:
        other.kill()
        other.wait()
    if not report["isolation"]["pid_namespace"]:
        pytest.skip("this host gives the child no PID namespace")
    text = json.dumps(report)
    assert token not in text and "PROCS " in text
    count = int(text.split("PROCS ")[1].split()[0])
    assert count <= 3, count  # the namespace's shell, the child, and what it forked


@pytest.mark.slow
def test_a_candidate_that_replaces_the_clocks_is_named_by_the_tamper_check():
    report = _evaluate("tamper_clock.py")
    findings = [f for shape in report["stages"]["verify"].get("shapes", []) for f in shape.get("findings", [])]
    text = json.dumps(report)
    assert "guard:tamper" in report["verdict"]["reasons"] or "guard:tamper" in text, report["verdict"]
    assert "time.perf_counter" in text and "time.monotonic" in text, findings
