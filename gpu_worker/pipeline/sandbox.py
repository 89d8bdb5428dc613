"""One fresh child process per candidate run, with what isolation this host allows (docs/isolation.md).

Always: spawned (never forked) with an explicit minimal environment, closed file descriptors, its
own session and process group (killed whole on timeout), a scratch directory as cwd/HOME/TMPDIR,
rlimits that CUDA survives (core 0, file size, open files, CPU time; not RLIMIT_AS on a GPU),
results only on a pipe the parent owns, text from the child redacted and cut (protocol.py).
Where the parent is root and it works: a new network namespace, a mount namespace with a private
tmpfs on /dev/shm, a PID namespace with its own /proc (other processes are invisible), and the uid
`nobody`. Where the kernel has Landlock, the child confines itself before any candidate code runs
(child.py): writes only in its scratch dir, /dev and /proc, no TCP, no signals outside the sandbox.
Each step that fails is skipped and recorded, never fatal, except one: a worker that cannot drop to
`nobody` refuses to run candidates unless ARK_UNSAFE_NO_UID_DROP=1 says it may (unsafe_no_uid_drop).
What applied is recorded in the report's isolation block.

A child can be started before it may run (`EarlyChild`): it loads while the worker does other work,
and gets its secret only when the worker opens its gate.
"""

from __future__ import annotations

import json
import logging
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

from .protocol import candidate_text, sanitize_message

log = logging.getLogger(__name__)
ROOT = Path(__file__).resolve().parent.parent.parent
NOBODY = 65534
UNSAFE_ENV = "ARK_UNSAFE_NO_UID_DROP"
SHM = Path("/dev/shm")
SHM_BYTES = 256 << 20  # the private /dev/shm's size: enough for a library's semaphores, not for a stash
MAX_RESULT_BYTES = 64 << 20
REAP_TIMEOUT_S = 30.0  # a SIGKILLed child stuck in the kernel (a GPU driver call) may never be reaped
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


def _die_with_worker() -> None:
    """preexec_fn of the child's first process (the child, or `unshare`): SIGKILL it when the worker's
    thread that started it dies. The child sets the same for itself; `unshare --kill-child` passes it on
    into a PID namespace, whose processes all die with its pid 1."""
    if _LIBC is not None:
        _LIBC.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


def _load_libc():
    try:
        import ctypes  # local: only for this Linux-only libc handle
        return ctypes.CDLL(None, use_errno=True)
    except (OSError, AttributeError):
        return None


_LIBC = _load_libc()  # loaded here: a preexec_fn must not import


def _probe(argv: list[str], **kwargs) -> bool:
    try:
        return subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60,
                              close_fds=True, **kwargs).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


class SandboxRefused(RuntimeError):
    """The worker cannot drop privileges and was not told it may run candidates anyway."""


def unsafe_no_uid_drop() -> bool:
    """The operator's explicit permission to run candidates as the worker's own uid."""
    return os.environ.get(UNSAFE_ENV, "") == "1"


def _namespace_init(mount_shm: bool) -> list[str]:
    """The shell that starts the child inside the namespaces: it mounts the private /dev/shm (a failed
    mount leaves the host's in place; the child's leftovers there are removed afterwards) and stays as the
    namespace's pid 1, so the child is an ordinary process that signals, even its own, can kill. It exits
    with 128 + n when the child died of signal n (run_child turns that back into -n)."""
    mount = f"mount -t tmpfs -o size={SHM_BYTES},mode=1777 ark-shm /dev/shm 2>/dev/null; " if mount_shm else ""
    return ["sh", "-c", mount + '"$@"', "sh"]


@lru_cache(maxsize=None)
def host_protections() -> dict:
    """Which isolation works here; probed once per worker process."""
    root = os.geteuid() == 0
    unshare = root and shutil.which("unshare") is not None
    netns = unshare and _probe(["unshare", "-n", "true"])
    # a private /dev/shm and a PID namespace with its own /proc, each only where it works
    shm_check = "mount -t tmpfs -o size=1m ark-shm /dev/shm && test ! -e /dev/shm/.ark-probe"
    # ARK_CHILD_NAMESPACES=0: an operator's switch for a host whose GPU stack fails inside them
    unshare_more = unshare and os.environ.get("ARK_CHILD_NAMESPACES", "1") != "0"
    mountns = unshare_more and _probe(["unshare", "-m", "--propagation", "private", "sh", "-c", shm_check])
    pidns = unshare_more and _probe(["unshare", "-p", "-f", "--kill-child", "-m", "--propagation", "private", "--mount-proc",
                                "sh", "-c", 'test "$(ls /proc | grep -c "^[0-9]")" -lt 10'])
    probe = [sys.executable, "-s", "-B", "-c", "import sys; sys.path.insert(0, sys.argv[1]); import gpu_worker.targets",
             str(ROOT)]
    as_nobody = root and _probe(probe, user=NOBODY, group=NOBODY, extra_groups=[], cwd="/",
                                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp"})
    prot = {"root": root, "netns": netns, "mountns": mountns, "pidns": pidns, "uid_drop": as_nobody,
            "unsafe_no_uid_drop": not as_nobody and unsafe_no_uid_drop()}
    if prot["unsafe_no_uid_drop"]:
        log.warning("UNSAFE: this worker cannot drop candidate children to uid %d and runs them as uid %d "
                    "because %s=1 is set; a candidate can read whatever this uid can", NOBODY, os.geteuid(),
                    UNSAFE_ENV)
    return prot


def isolation_summary() -> dict:
    """What a heartbeat and the dashboard show: whether candidates run without dropping privileges."""
    prot = host_protections()
    return {"uid_drop": prot["uid_drop"], "unsafe_no_uid_drop": prot["unsafe_no_uid_drop"],
            "netns": prot["netns"], "private_shm": prot["mountns"], "pid_namespace": prot["pidns"]}


def child_argv(prot: dict, command: list[str]) -> list[str]:
    """The child's command inside the namespaces this host allows."""
    flags = []
    if prot["netns"]:
        flags.append("-n")
    if prot["pidns"]:
        flags += ["-p", "-f", "--kill-child", "--mount-proc"]
    if prot["pidns"] or prot["mountns"]:
        flags += ["-m", "--propagation", "private"]
    if not flags:
        return command
    return ["unshare", *flags, "--", *_namespace_init(prot["mountns"]), *command]


def _shm_entries() -> dict[str, tuple[int, int]]:
    try:
        return {e.name: (e.inode(), e.stat(follow_symlinks=False).st_uid) for e in os.scandir(SHM)}
    except OSError:
        return {}


def _remove_new_shm(before: dict, uid: int) -> int:
    """Remove what appeared in the host's /dev/shm during the run and belongs to the child's uid; the count
    goes to the report. Names are the candidate's, so they are never reported."""
    removed = 0
    for name, (inode, owner) in _shm_entries().items():
        if before.get(name, (None,))[0] == inode or owner != uid:
            continue
        path = SHM / name
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
            removed += 1
        except OSError:
            continue
    return removed


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def child_rlimits(device: str, timeout_s: float) -> dict:
    limits = {"RLIMIT_CORE": 0, "RLIMIT_FSIZE": _env_int("ARK_CHILD_FSIZE_BYTES", 8 << 30), "RLIMIT_NOFILE": 4096,
              "RLIMIT_CPU": int(timeout_s * 4 + 60)}
    if device == "cpu":
        limits["RLIMIT_AS"] = 48 << 30  # CUDA needs a huge address space (docs/isolation.md); CPU mode does not
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
        # CuTe DSL compiles for the H200's arch without a GPU; Triton runs through its interpreter. One torch
        # thread: the interpreter's many small tensor ops gain nothing from two, and on a 2-core host two
        # threads beside the parent's referee made an FP8 seed's verification 5x slower (138 s against 11 min)
        env.update({"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1",
                    "CUTE_DSL_ARCH": "sm_90a"})
    return env


def run_child(cfg: dict, *, secret: str, timeout_s: float, scratch: Path, device: str,
              on_message=None, gate: threading.Event | None = None, cancel: threading.Event | None = None,
              max_gate_wait_s: float = 0.0, wrap: list[str] | None = None) -> ChildRun:
    """Run one child to its end. The secret goes to its stdin once it has loaded the candidate and,
    with a `gate`, once the gate is set too; the time a loaded child waits at the closed gate does not
    count against `timeout_s` (up to `max_gate_wait_s` of it does not). Setting `cancel` kills the
    child's group and returns the run marked `cancelled`. `wrap` goes before the child's command, inside
    the namespaces, and starts as the worker's user: a wrapper that shares the child's dirs drops to the
    child's user first (the profiler of pipeline/ncu.py); the child drops to `nobody` itself where it
    still runs as root."""
    prot = host_protections()
    if not prot["uid_drop"] and not prot["unsafe_no_uid_drop"]:
        raise SandboxRefused(f"this worker cannot run candidate children as uid {NOBODY} (it needs root and a "
                             f"Python that uid can read); set {UNSAFE_ENV}=1 to run them as uid {os.geteuid()} "
                             "anyway, which the report and the dashboard will show")
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
    argv = child_argv(prot, [*(wrap or []), sys.executable, "-s", "-B", "-m", "gpu_worker.pipeline.child",
                             json.dumps(cfg)])
    run = ChildRun(protections={"spawned": True, "explicit_env": True, "close_fds": True, "new_session": True,
                                "network_namespace": prot["netns"], "uid": uid if uid is not None else os.geteuid(),
                                "uid_dropped": uid is not None, "unsafe_no_uid_drop": uid is None,
                                "mount_namespace": prot["mountns"] or prot["pidns"],
                                "private_shm": prot["mountns"], "pid_namespace": prot["pidns"],
                                "private_proc": prot["pidns"], "rlimits": cfg["rlimits"], "scratch_cwd": True,
                                "scratch_tmpdir": True})
    shm_before = _shm_entries()
    log_path = scratch / "child.log"
    t0 = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                                cwd=dirs["work"], env={**child_env(dirs, device), "ARK_SANDBOX_MARK": mark},
                                close_fds=True, pass_fds=(write_fd,), start_new_session=True,
                                preexec_fn=_die_with_worker)
    os.close(write_fd)
    buf = bytearray()  # what came after the last newline; searched only where it is new (a flood is linear)
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
            scan = len(buf)
            buf += chunk
            while (newline := buf.find(b"\n", scan)) >= 0:
                line = bytes(buf[:newline])
                del buf[:newline + 1]
                scan = 0
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(msg, dict):
                    continue
                sanitize_message(msg)
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
        _reap(proc, run, REAP_TIMEOUT_S)
        escaped = _kill_marked(mark)
        if escaped:
            run.protections["escaped_processes_killed"] = escaped
        # with a private /dev/shm its tmpfs went with the child; otherwise what it left there goes now
        if not prot["mountns"]:
            run.protections["shm_files_removed"] = _remove_new_shm(shm_before, uid if uid is not None else os.geteuid())
        try:
            proc.stdin.close()
        except OSError:
            pass
    run.returncode = proc.returncode
    if argv[0] == "unshare" and run.returncode is not None and 128 < run.returncode < 128 + signal.NSIG:
        run.returncode = 128 - run.returncode  # the namespace's shell reports a signal death as 128 + n
    run.wall_s = time.monotonic() - t0
    hello = run.messages[0] if run.messages and run.messages[0].get("type") == "hello" else {}
    limits = hello.get("limits") or {}  # sent before any candidate code exists in the child
    run.protections["landlock"] = limits.get("landlock")
    try:
        run.log_tail = candidate_text(log_path.read_bytes()[-16000:].decode("utf-8", "replace"), 4000)
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


def _reap(proc: subprocess.Popen, run: ChildRun, timeout_s: float) -> None:
    """Wait a bounded time for a killed child to exit. A process in an uninterruptible wait (a GPU driver
    call on a hung device) outlives SIGKILL; the evaluation then ends with a finding instead of waiting
    with it, and the returncode stays None."""
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        run.messages.append({"type": "fatal", "code": "harness:unreaped",
                             "message": f"the child (pid {proc.pid}) did not exit within {timeout_s:.0f} s of "
                                        "SIGKILL (an uninterruptible wait, such as a hung GPU call); the "
                                        "evaluation ended without it"})


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
