"""The sandboxed child: imports one candidate, runs it on inputs made from a secret seed, and
writes what it saw to the result pipe. It never sees a reference answer during verification;
the parent judges the outputs it saved (pipeline/referee.py).

Run as `python -m gpu_worker.pipeline.child '<config json>'` by pipeline/sandbox.py only.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import threading
import time
import traceback

# Timing and bookkeeping references are taken before any candidate code exists in this process.
_perf = time.perf_counter
_active_threads = threading.active_count


def _apply_limits(cfg: dict) -> dict:
    applied = {}
    for name, value in cfg.get("rlimits", {}).items():
        res = getattr(resource, name)
        try:
            resource.setrlimit(res, (value, value))
            applied[name] = value
        except (ValueError, OSError) as e:
            applied[name] = f"failed: {e}"
    uid = cfg.get("uid")
    if uid is not None and os.getuid() == 0:
        os.setgroups([])
        os.setgid(cfg.get("gid", uid))
        os.setuid(uid)
    applied["uid"] = os.getuid()
    return applied


def _die_with_parent(parent: int) -> bool:
    """SIGKILL this child when the worker dies (set after the uid change, which clears it)."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        ok = libc.prctl(1, 9, 0, 0, 0) == 0  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        return False
    if os.getppid() != parent:
        os._exit(1)
    return ok


def main() -> None:
    cfg = json.loads(sys.argv[1])
    parent = os.getppid()
    limits = _apply_limits(cfg)
    limits["die_with_parent"] = _die_with_parent(parent)
    from .protocol import Writer
    out = Writer(cfg["result_fd"])
    out.send(type="hello", pid=os.getpid(), uid=os.getuid(), limits=limits)
    try:
        import torch  # noqa: F401

        from . import child_run
    except BaseException:
        out.send(type="fatal", code="harness:import", message=traceback.format_exc()[-4000:])
        raise
    child_run.run(cfg, out, perf=_perf, active_threads=_active_threads)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip interpreter teardown (seconds with torch and triton loaded); the pipe is all that matters


if __name__ == "__main__":
    main()
