"""One fresh child process per candidate run, with what isolation this host allows (REFERENCE.md §6).

Always: spawned (never forked) with an explicit minimal environment, closed file descriptors, its
own session and process group (killed whole on timeout), a scratch directory as cwd/HOME/TMPDIR,
rlimits that CUDA survives (core 0, file size, open files, CPU time; not RLIMIT_AS on a GPU),
results only on a pipe the parent owns. Where the parent is root and it works: a new network
namespace (`unshare -n`) and the uid `nobody`. Where the kernel has Landlock, the child confines
itself before any candidate code runs (child.py): writes only in its scratch dir, /dev and /proc,
no TCP, no signals outside the sandbox. What applied is recorded in the report.

A child can be started before it may run (`EarlyChild`): it loads while the worker does other work,
and gets its secret only when the worker opens its gate.
"""

from __future__ import annotations

import json
import os
import resource
import secrets
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache, partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
NOBODY = 65534
MAX_RESULT_BYTES = 64 << 20
PASSTHROUGH_ENV = ("PATH", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
                   "TRITON_LIBCUDA_PATH", "TRITON_PTXAS_PATH", "NVIDIA_VISIBLE_DEVICES", "LANG", "LC_ALL")


def scrub_environ_block() -> bool:
    """Zero this process's original environment block, which is what /proc/<pid>/environ shows, after
    moving every variable to the heap (setenv copies): a candidate's child that runs as the worker's own uid
    (where dropping to nobody fails) can then not read the worker's secrets there. It can still read the
    worker's memory through /proc/<pid>/mem where ptrace would be allowed (same uid, root); dropping the
    uid is what closes that. Returns whether /proc/self/environ is now empty; False where /proc or
    /proc/self/mem is not usable (then nothing changed but the copies)."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])   # env_start and env_end: fields 50 and 51
        for name, value in list(os.environ.items()):
            os.environ[name] = value                      # libc's environ now points at heap copies
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            mem.seek(start)
            mem.write(b"\0" * (end - start))
        return Path("/proc/self/environ").read_bytes().strip(b"\0") == b""
    except (OSError, ValueError, IndexError):
        return False


@dataclass
class ChildRun:
    messages: list = field(default_factory=list)
    returncode: int | None = None
    timed_out: bool = False
    log_tail: str = ""
    wall_s: float = 0.0
    protections: dict = field(default_factory=dict)
    cancelled: bool = False  # ended by the harness (cancel), not by anything the child did
    released_s: float | None = None  # when the secret went to the child, seconds after the spawn
    gate_wait_s: float | None = None  # how long the loaded child waited at a closed gate


def _probe(argv: list[str], **kwargs) -> bool:
    try:
        return subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60,
                              close_fds=True, **kwargs).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@lru_cache(maxsize=None)
def host_protections() -> dict:
    """Which isolation works here; probed once per worker process."""
    root = os.geteuid() == 0
    netns = root and shutil.which("unshare") is not None and _probe(["unshare", "-n", "true"])
    probe = [sys.executable, "-s", "-B", "-c", "import sys; sys.path.insert(0, sys.argv[1]); import gpu_worker.targets",
             str(ROOT)]
    as_nobody = root and _probe(probe, user=NOBODY, group=NOBODY, extra_groups=[], cwd="/",
                                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp"})
    return {"root": root, "netns": netns, "uid_drop": as_nobody}


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def child_rlimits(device: str, timeout_s: float) -> dict:
    limits = {"RLIMIT_CORE": 0, "RLIMIT_FSIZE": _env_int("ARK_CHILD_FSIZE_BYTES", 8 << 30), "RLIMIT_NOFILE": 4096,
              "RLIMIT_CPU": int(timeout_s * 4 + 60)}
    if device == "cpu":
        limits["RLIMIT_AS"] = 48 << 30  # CUDA needs a huge address space (REFERENCE §6); CPU mode does not
    return {k: v for k, v in limits.items() if hasattr(resource, k)}


def make_scratch(base: Path, uid: int | None) -> dict[str, Path]:
    dirs = {name: base / name for name in ("work", "home", "tmp", "triton", "outputs")}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
        os.chmod(d, 0o755)
        if uid is not None:
            os.chown(d, uid, uid)
    os.chmod(base, 0o711)
    return dirs


def child_env(dirs: dict[str, Path], device: str) -> dict[str, str]:
    env = {k: os.environ[k] for k in PASSTHROUGH_ENV if k in os.environ}
    env.setdefault("PATH", "/usr/bin:/bin")
    env.update({"HOME": str(dirs["home"]), "TMPDIR": str(dirs["tmp"]), "TRITON_CACHE_DIR": str(dirs["triton"]),
                "TRITON_HOME": str(dirs["home"]), "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1",
                "PYTHONUNBUFFERED": "1", "CUTE_DSL_CACHE_DIR": str(dirs["home"])})
    if device == "cpu":
        # CuTe DSL compiles for the H200's arch without a GPU; Triton runs through its interpreter
        env.update({"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "2",
                    "CUTE_DSL_ARCH": "sm_90a"})
    return env


def run_child(cfg: dict, *, secret: str, timeout_s: float, scratch: Path, device: str,
              on_message=None, gate: threading.Event | None = None, cancel: threading.Event | None = None,
              max_gate_wait_s: float = 0.0) -> ChildRun:
    """Run one child to its end. The secret goes to its stdin once it has loaded the candidate and,
    with a `gate`, once the gate is set too; the time a loaded child waits at the closed gate does not
    count against `timeout_s` (up to `max_gate_wait_s` of it does not). Setting `cancel` kills the
    child's group and returns the run marked `cancelled`."""
    prot = host_protections()
    uid = NOBODY if prot["uid_drop"] else None
    dirs = make_scratch(scratch, uid)
    read_fd, write_fd = os.pipe()
    rlimits = child_rlimits(device, timeout_s + max_gate_wait_s)
    if uid is not None and hasattr(resource, "RLIMIT_NPROC"):
        # A fork bomb stops at this many processes and threads of `nobody` (root is exempt, so only here).
        rlimits["RLIMIT_NPROC"] = _env_int("ARK_CHILD_NPROC", 4096)
    cfg = dict(cfg, result_fd=write_fd, outputs_dir=str(dirs["outputs"]), scratch=str(scratch),
               rlimits=rlimits, uid=uid, gid=uid,
               # ARK_LANDLOCK=0: an operator's switch for a host where Landlock breaks the GPU stack;
               # the report then says "landlock": {"applied": false, "why": "ARK_LANDLOCK=0"}
               landlock=os.environ.get("ARK_LANDLOCK", "1") != "0")
    # Every process the child forks inherits this mark: after the run, any that left the child's
    # process group (setsid, double fork) is found by it and killed.
    mark = secrets.token_hex(12)
    disk_limit = _env_int("ARK_CHILD_DISK_BYTES", 16 << 30)
    argv = [sys.executable, "-s", "-B", "-m", "gpu_worker.pipeline.child", json.dumps(cfg)]
    if prot["netns"]:
        argv = ["unshare", "-n", "--"] + argv
    run = ChildRun(protections={"spawned": True, "explicit_env": True, "close_fds": True, "new_session": True,
                                "network_namespace": prot["netns"], "uid": uid if uid is not None else os.geteuid(),
                                "rlimits": cfg["rlimits"], "scratch_cwd": True})
    log_path = scratch / "child.log"
    t0 = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                                cwd=dirs["work"], env={**child_env(dirs, device), "ARK_SANDBOX_MARK": mark},
                                close_fds=True, pass_fds=(write_fd,), start_new_session=True)
    os.close(write_fd)
    buf = b""
    total = 0
    deadline = t0 + timeout_s
    hard_deadline = deadline + max_gate_wait_s
    waiting_since = None  # set while the loaded child waits at the closed gate
    done_at = None
    next_disk_check = t0
    stop_now = False  # set when the harness ends the run (timeout, disk, flood, cancel): no grace to exit
    try:
        while True:
            if cancel is not None and cancel.is_set():
                run.cancelled = stop_now = True
                break
            if waiting_since is not None and gate.is_set():
                run.gate_wait_s = time.monotonic() - waiting_since
                deadline = min(deadline + run.gate_wait_s, hard_deadline)
                waiting_since = None
                _send_secret(proc, secret, run, t0)
            left = (hard_deadline if waiting_since is not None else deadline) - time.monotonic()
            if left <= 0:
                run.timed_out = True
                break
            if time.monotonic() >= next_disk_check:
                next_disk_check = time.monotonic() + 0.25
                if _dir_bytes(scratch, limit=disk_limit) > disk_limit:
                    run.messages.append({"type": "fatal", "code": "harness:disk",
                                         "message": f"the child wrote more than {disk_limit} bytes to its scratch "
                                                    "directory (its output included) and was killed"})
                    stop_now = True
                    break
            if done_at is not None and time.monotonic() - done_at > 3.0:
                break  # it said it was done; do not wait for a slow teardown
            # a waiting child is polled often: the gate's latency adds to the evaluation's wall time
            ready, _, _ = select.select([read_fd], [], [], min(left, 0.25 if waiting_since is None else 0.05))
            if not ready:
                if proc.poll() is not None:
                    break  # the child exited; a process it forked may hold the pipe open, but says nothing
                continue
            chunk = os.read(read_fd, 1 << 16)
            if not chunk:
                break
            total += len(chunk)
            if total > MAX_RESULT_BYTES:
                run.messages.append({"type": "fatal", "code": "harness:flood", "message": "result pipe flooded"})
                stop_now = True
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(msg, dict):
                    continue
                msg["_received_s"] = time.monotonic() - t0
                run.messages.append(msg)
                if (msg.get("type") == "load" and msg.get("status") == "pass" and not proc.stdin.closed
                        and waiting_since is None):
                    # once: a candidate can write "load" lines itself, and must not crash the worker with them
                    if gate is None or gate.is_set():
                        _send_secret(proc, secret, run, t0)
                    else:
                        waiting_since = time.monotonic()
                if msg.get("type") == "done":
                    done_at = time.monotonic()
                if on_message:
                    on_message(msg)
    finally:
        os.close(read_fd)
        if not (run.timed_out or stop_now) and proc.poll() is None:
            try:
                proc.wait(timeout=10)  # it closed its pipe or said done: let it exit on its own
            except subprocess.TimeoutExpired:
                pass
        _kill_group(proc.pid)
        proc.wait()
        escaped = _kill_marked(mark)
        if escaped:
            run.protections["escaped_processes_killed"] = escaped
        try:
            proc.stdin.close()
        except OSError:
            pass
    run.returncode = proc.returncode
    run.wall_s = time.monotonic() - t0
    hello = run.messages[0] if run.messages and run.messages[0].get("type") == "hello" else {}
    limits = hello.get("limits") or {}  # sent before any candidate code exists in the child
    run.protections["landlock"] = limits.get("landlock")
    try:
        run.log_tail = log_path.read_bytes()[-4000:].decode("utf-8", "replace")
    except OSError:
        run.log_tail = ""
    return run


def _send_secret(proc: subprocess.Popen, secret: str, run: ChildRun, t0: float) -> None:
    run.released_s = time.monotonic() - t0
    try:
        proc.stdin.write(f"{secret}\n".encode())
        proc.stdin.close()
    except (OSError, ValueError):
        pass


class EarlyChild:
    """run_child in a background thread, started before the child may run: it imports and loads (a
    bench child also warms up) while the caller does other work. release() opens its gate; cancel()
    kills it (a no-op once it has ended) and, like result(), waits for the thread. `on_message` is
    called in that thread."""

    def __init__(self, cfg: dict, *, secret: str, timeout_s: float, max_gate_wait_s: float, scratch: Path,
                 device: str, on_message=None):
        self._gate, self._cancel = threading.Event(), threading.Event()
        self._call = partial(run_child, cfg, secret=secret, timeout_s=timeout_s, scratch=scratch, device=device,
                             on_message=on_message, gate=self._gate, cancel=self._cancel,
                             max_gate_wait_s=max_gate_wait_s)
        self._run: ChildRun | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="ark-early-child", daemon=True)

    def _main(self) -> None:
        try:
            self._run = self._call()
        except BaseException as e:  # re-raised in the caller's thread by result()
            self._error = e

    def start(self) -> EarlyChild:
        host_protections()  # probed here, once, rather than by this thread and the caller's at the same time
        self._thread.start()
        return self

    def release(self) -> None:
        self._gate.set()

    def cancel(self) -> None:
        self._cancel.set()
        self._thread.join()

    def result(self) -> ChildRun:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._run


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _dir_bytes(root: Path, *, limit: int, max_entries: int = 200_000) -> int:
    """Bytes allocated under root; more than `limit` as soon as it is exceeded, or when there are more
    than `max_entries` files (a flood of empty files fills a disk too)."""
    total, seen, stack = 0, 0, [str(root)]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                seen += 1
                if seen > max_entries:
                    return limit + 1
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    else:
                        st = entry.stat(follow_symlinks=False)
                        total += max(st.st_size, st.st_blocks * 512)  # delayed allocation: blocks lag
                except OSError:
                    continue
                if total > limit:
                    return total
    return total


def _marked_pids(mark: str) -> list[int]:
    needle = f"ARK_SANDBOX_MARK={mark}".encode()
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if needle in f.read():
                    pids.append(int(name))
        except OSError:
            continue
    return pids


def _kill_marked(mark: str, rounds: int = 50) -> int:
    """SIGKILL every process that carries the child's mark (it escaped the process group), until two
    passes in a row find none; returns how many were killed."""
    if not os.path.isdir("/proc"):
        return 0
    killed, quiet = set(), 0
    for _ in range(rounds):
        pids = [p for p in _marked_pids(mark) if p != os.getpid()]
        if not pids:
            quiet += 1
            if quiet >= 2:
                break
        else:
            quiet = 0
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.05)
    return len(killed)
