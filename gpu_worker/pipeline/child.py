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
        # local: ctypes only for this Linux-only prctl call
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        ok = libc.prctl(1, 9, 0, 0, 0) == 0  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        return False
    if os.getppid() != parent:
        os._exit(1)
    return ok


# Landlock (linux/landlock.h): filesystem rights that change something; reads and execution stay open
_LL_WRITE = sum(1 << bit for bit in (1, 4, 5, 6, 7, 8, 9, 10, 11, 12))  # write_file, remove_*, make_*
_LL_REFER, _LL_TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3
_LL_NET_TCP = 0b11  # bind, connect (ABI 4)
_LL_SCOPE_SIGNAL = 1 << 1  # ABI 6
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # the same on every architecture


def _landlock(writable: list[str]) -> dict:
    """Confine this process and its descendants: writes only beneath `writable`, no TCP, signals and
    ptrace-style access (/proc/<pid>/environ, process_vm_readv) only inside the sandbox. Best effort:
    what applied is returned and lands in the report; a kernel without Landlock leaves it off."""
    # local: ctypes only for the Landlock syscalls
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 1:
        return {"applied": False, "why": f"Landlock unavailable (errno {ctypes.get_errno()})"}
    fs = _LL_WRITE | (_LL_REFER if abi >= 2 else 0) | (_LL_TRUNCATE if abi >= 3 else 0)

    class RulesetAttr(ctypes.Structure):
        _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed", ctypes.c_uint64), ("fd", ctypes.c_int32)]

    attr = RulesetAttr(fs, _LL_NET_TCP if abi >= 4 else 0, _LL_SCOPE_SIGNAL if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        return {"applied": False, "why": f"landlock_create_ruleset failed (errno {ctypes.get_errno()})"}
    try:
        for path in writable:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = PathBeneath(fs, fd)
                if libc.syscall(_SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(1), ctypes.byref(rule),
                                ctypes.c_uint32(0)):
                    return {"applied": False, "why": f"landlock_add_rule {path} (errno {ctypes.get_errno()})"}
            finally:
                os.close(fd)
        no_new_privs = libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS (Landlock needs it)
        if no_new_privs or libc.syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)):
            return {"applied": False, "why": f"landlock_restrict_self failed (errno {ctypes.get_errno()})"}
    finally:
        os.close(ruleset)
    return {"applied": True, "abi": abi, "writable": writable, "tcp": abi >= 4, "signals_scoped": abi >= 6}


def main() -> None:
    cfg = json.loads(sys.argv[1])
    parent = os.getppid()
    limits = _apply_limits(cfg)
    limits["die_with_parent"] = _die_with_parent(parent)
    # local: after the resource limits are applied: the child imports as little as it can before them
    from .protocol import Writer
    out = Writer(cfg["result_fd"])
    try:
        if cfg.get("device") == "cuda":
            import torch  # local: CUDA init before Landlock, as the comment below says

            # Landlock goes on after CUDA init, the order seen working on an H200 (docs/harness.md, The processes);
            # the candidate is imported later, under it, either way.
            torch.empty(1, device="cuda")
        if cfg.get("scratch"):
            # /dev: GPU device files and /dev/shm; /proc stays writable on a GPU (docs/harness.md, The processes),
            # CPU mode needs only its own /proc/<pid>.
            proc = "/proc" if cfg.get("device") == "cuda" else os.path.realpath("/proc/self")
            limits["landlock"] = (_landlock([cfg["scratch"], "/dev", proc]) if cfg.get("landlock", True)
                                  else {"applied": False, "why": "ARK_LANDLOCK=0"})
        out.send(type="hello", pid=os.getpid(), uid=os.getuid(), limits=limits)
        import torch  # noqa: F401,F811

        # local: torch and the harness modules load after the sandbox is in place, before the candidate
        from . import child_run, tamper

        # the last step before any candidate code exists here: what the report relies on, as it is now
        tamper.arm(writer=out, result_fd=cfg["result_fd"])
    except BaseException:
        out.send(type="fatal", code="harness:import", message=traceback.format_exc()[-4000:])
        raise
    child_run.run(cfg, out, perf=_perf, active_threads=_active_threads)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip interpreter teardown (seconds with torch and triton loaded); the pipe is all that matters


if __name__ == "__main__":
    main()
