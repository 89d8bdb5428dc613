"""console.serve: the product's web command. Several worker processes behind one port; a killed worker is
replaced while the others go on answering; each process's database pool is sized from the server's limit."""

import os
import signal
import sys
import urllib.request
from pathlib import Path

import pytest

from console import serve
from tests.conftest import wait_until
from tests.reliability.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]


def test_the_pool_share_divides_the_server_limit_among_the_processes():
    # 100 connections, 10 reserved, 2 web workers + the loop worker and its beat: 90 // 4 = 22, capped at 16
    assert serve.pool_size_for(100, 2) == 16
    assert serve.pool_size_for(50, 4) == 6          # 40 // 6
    assert serve.pool_size_for(20, 8) == 2          # 10 // 10 = 1: never below 2 (one request and the session)


def test_the_command_names_the_uvicorn_worker_and_no_shared_control_socket():
    argv = serve.gunicorn_argv("127.0.0.1:1", 3)
    assert argv[argv.index("--worker-class") + 1] == "console.serve.Worker"
    assert argv[argv.index("--workers") + 1] == "3"
    assert "--no-control-socket" in argv
    assert serve.Worker.CONFIG_KWARGS["lifespan"] == "off"


def _children(pid: int) -> set[int]:
    kids = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        kids |= {int(c) for c in (task / "children").read_text().split()}
    return kids


def _get(url: str) -> int:
    try:
        return urllib.request.urlopen(url, timeout=5).status
    except OSError:
        return 0


@pytest.mark.slow
def test_two_workers_serve_one_port_and_a_killed_one_is_replaced(tmp_path, start_process):
    port = free_port()
    proc = start_process([sys.executable, "-m", "console.serve", "--bind", f"127.0.0.1:{port}", "--workers", "2"],
                         name="console", DATABASE_URL=f"sqlite:///{tmp_path / 'serve.sqlite3'}", DJANGO_DEBUG="0")
    url = f"http://127.0.0.1:{port}/healthz"
    try:
        wait_until(lambda: len(_children(proc.popen.pid)) == 2 and _get(url) == 200, timeout_s=60, interval_s=0.2)
    except AssertionError:
        raise AssertionError(f"workers {_children(proc.popen.pid)}: {proc.output()[-2000:]}") from None
    first = _children(proc.popen.pid)
    victim = min(first)
    os.kill(victim, signal.SIGKILL)
    # the other worker answers while gunicorn starts a replacement
    assert all(_get(url) == 200 for _ in range(20))
    wait_until(lambda: len(_children(proc.popen.pid)) == 2 and victim not in _children(proc.popen.pid),
               timeout_s=30, interval_s=0.2)
    assert _get(url) == 200
