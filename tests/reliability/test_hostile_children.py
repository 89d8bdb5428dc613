"""A candidate that forks, fills the disk or floods its output: the sandbox bounds it, kills its child
and every process it spawned (even those that left its process group), says what happened, and the
next candidate runs normally. Infinite loops and memory blow-ups are covered in tests/redteam
(infinite_loop.py: verify:timeout; oom_alloc.py) and the hung-child test in tests/gpu_worker.

These call the sandbox directly (no guard): the guard would refuse `os.fork` and `open(...)` in the
source; this is the layer below it, for a candidate that gets past the guard."""

import json
from pathlib import Path

import pytest

from gpu_worker.pipeline.sandbox import host_protections, run_child
from tests.conftest import wait_until
from tests.redteam.catalog import source as redteam_source
from tests.reliability.conftest import live_children

ROOT = Path(__file__).resolve().parents[2]
HONEST = redteam_source("honest_topk_bisect")
MiB = 1 << 20


def _run(tmp_path, source: str, timeout_s: float = 60):
    (tmp_path / "work").mkdir(parents=True, exist_ok=True)
    path = tmp_path / "work" / "candidate.py"
    path.write_text(source)
    cfg = {"target": "dsa_topk", "device": "cpu", "mode": "verify", "profile": "smoke", "dsl": "triton",
           "kernels": ["_select_kernel"], "candidate_path": str(path), "shapes": []}
    return run_child(cfg, secret="1", timeout_s=timeout_s, scratch=tmp_path, device="cpu")


FORK_BOMB = """
import os, sys, time
n = 0
for i in range(300):
    try:
        pid = os.fork()
    except OSError as e:
        print("FORK FAILED", e, flush=True)
        break
    if pid == 0:
        os.setsid()  # leave the sandbox's process group, so that killing the group misses it
        time.sleep(600)
        os._exit(0)
    n += 1
print("FORKED", n, flush=True)
raise RuntimeError("forked and left")
"""


def test_a_fork_bomb_is_bounded_and_every_escaped_process_dies(tmp_path, monkeypatch):
    monkeypatch.setenv("ARK_CHILD_NPROC", "64")
    run = _run(tmp_path, FORK_BOMB)
    forked = int(run.log_tail.split("FORKED")[1].split()[0])
    if host_protections()["uid_drop"]:  # RLIMIT_NPROC binds `nobody`; root is exempt from it
        assert run.protections["rlimits"]["RLIMIT_NPROC"] == 64
        assert "FORK FAILED" in run.log_tail and forked < 64
    assert forked >= 1
    # The forked processes left the process group; the sandbox found them by their mark and killed them,
    # or, where the child had its own PID namespace, they died with it.
    if not run.protections.get("pid_namespace"):
        assert run.protections.get("escaped_processes_killed", 0) >= 1
    print("forked:", forked, "escaped and killed:", run.protections.get("escaped_processes_killed", 0),
          "uid:", run.protections["uid"])
    wait_until(lambda: not live_children(tmp_path), timeout_s=10)


DISK_FILL = """
import os
written = 0
i = 0
while written < 4 * 1024 * 1024 * 1024:
    try:
        with open(f"fill-{i}.bin", "wb") as f:
            while True:
                f.write(b"x" * (1 << 20))
                f.flush()
                written += 1 << 20
    except OSError as e:  # EFBIG at RLIMIT_FSIZE: on to the next file
        print("FILE FULL", i, e, flush=True)
        i += 1
print("WROTE ALL", flush=True)
"""


def test_a_disk_fill_is_bounded_per_file_and_per_scratch(tmp_path, monkeypatch):
    monkeypatch.setenv("ARK_CHILD_FSIZE_BYTES", str(16 * MiB))
    monkeypatch.setenv("ARK_CHILD_DISK_BYTES", str(64 * MiB))
    run = _run(tmp_path, DISK_FILL)
    assert "FILE FULL" in run.log_tail and "File too large" in run.log_tail  # RLIMIT_FSIZE stops each file...
    files = list((tmp_path / "work").glob("fill-*.bin"))
    assert files and max(f.stat().st_size for f in files) <= 16 * MiB
    # ...and the scratch watchdog stopped the next ones, with a finding that says so.
    assert "WROTE ALL" not in run.log_tail
    assert [m["code"] for m in run.messages if m.get("type") == "fatal"] == ["harness:disk"]
    assert not live_children(tmp_path)


STDOUT_FLOOD = """
import sys
line = "flood " * 10000 + "\\n"
while True:
    try:
        sys.stdout.write(line)
    except OSError:
        sys.stderr.write("stdout refused\\n")
"""

PIPE_FLOOD = """
import json, os, sys
fd = json.loads(sys.argv[1])["result_fd"]  # the harness's result pipe, found from the command line
chunk = b"x" * (1 << 20)  # no newline: not a message, only bytes the parent must not buffer forever
while True:
    os.write(fd, chunk)
"""


def test_an_output_flood_is_bounded_and_the_next_candidate_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("ARK_CHILD_FSIZE_BYTES", str(16 * MiB))
    out = _run(tmp_path / "stdout", STDOUT_FLOOD, timeout_s=30)
    # stdout and stderr go to a file that RLIMIT_FSIZE bounds: the write fails (EFBIG), the candidate
    # dies of it, and its load failure, sent on the result pipe, says why
    assert (tmp_path / "stdout" / "child.log").stat().st_size <= 16 * MiB
    said = json.dumps(out.messages)
    assert "File too large" in said or out.timed_out, said[-2000:]
    assert not live_children(tmp_path / "stdout")

    pipe = _run(tmp_path / "pipe", PIPE_FLOOD, timeout_s=120)
    assert any(m.get("code") == "harness:flood" for m in pipe.messages), pipe.messages[:3]
    assert not pipe.timed_out and not live_children(tmp_path / "pipe")

    # The worker is fine: the next candidate runs to the end in a fresh child.
    honest = _run(tmp_path / "next", HONEST, timeout_s=120)
    assert any(m.get("type") == "done" for m in honest.messages), honest.log_tail[-2000:]


@pytest.fixture(autouse=True)
def _no_leftovers(tmp_path):
    yield
    assert not live_children(tmp_path)
