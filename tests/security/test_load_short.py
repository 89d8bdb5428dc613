"""The short form of bench/console_load.py: the console as served (console.serve) with a real loop worker, HTTP at
10 req/s for 20 s and 20 websocket clients on run pages while a producer writes events through the
services. No request may fail and no event may be lost (missed on a socket and not recovered by the
HTTP re-read). Latency figures are written, not asserted (docs/conventions.md: no timed assertions)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_short_console_load_has_no_errors_and_loses_no_events(tmp_path):
    out = tmp_path / "console-load.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.setdefault("REDIS_URL", "redis://127.0.0.1:6379/10")
    proc = subprocess.run(
        [sys.executable, "bench/console_load.py", "--short", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    figures = json.loads(out.read_text())
    http, ws = figures["http"], figures["websocket"]
    assert http["requests"] == 200 and http["errors"] == 0, http
    assert ws["connect_errors"] == 0 and ws["closed_early"] == 0, ws
    assert figures["producer"]["errors"] == 0 and figures["producer"]["candidates"] > 0, figures["producer"]
    assert ws["events_written"] > 0 and ws["delivered"] > 0, ws
    assert ws["lost"] == 0 and ws["resync_errors"] == 0, ws
    assert ws["delivered"] + ws["recovered_by_http_resync"] == ws["deliveries_expected"], ws
