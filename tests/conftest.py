"""Shared fixtures: real Redis, the real database (SQLite or PostgreSQL via DATABASE_URL), real
Celery workers in subprocesses, and the people of every permission test (docs/conventions.md, Tests):
alice owns things and reviews, bob reviews, dana deploys, charlie is a viewer with no role."""

import asyncio
import inspect
import math
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# This test run's own loop queue: workers of other runs on the same Redis never take its messages.
os.environ.setdefault("ARK_LOOP_QUEUE", f"loop.test{os.getpid()}")
# This host's Python lives where `nobody` cannot read it, so children cannot drop to nobody here; the
# sandbox refuses to run candidates then unless told it may (gpu_worker/pipeline/sandbox.py).
os.environ.setdefault("ARK_UNSAFE_NO_UID_DROP", "1")


_DATABASE_FIXTURES = {"db", "transactional_db", "django_db_setup", "live_server"}


def pytest_addoption(parser):
    parser.addoption("--database-only", action="store_true",
                     help="run only the tests that touch the database (scripts/test's PostgreSQL pass: the rest "
                          "behave the same on either database and already ran on SQLite)")


def pytest_collection_modifyitems(config, items):
    if not config.getoption("database_only"):
        return
    keep, drop = [], []
    for item in items:
        uses_db = item.get_closest_marker("django_db") or _DATABASE_FIXTURES & set(getattr(item, "fixturenames", ()))
        (keep if uses_db else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_collection_finish(session):
    """Tests that run Triton kernels in this process (tests/candidates, the in-process verify loop) get the
    interpreter without its per-program repeated work, as a CPU child does (gpu_worker/pipeline/interpreter_fix.py:
    bit-identical results). Where the interpreter is on, or a collected module imported Triton: a test that loads
    its kernel only when it runs (tests/candidates) imports Triton after collection, and a run of such tests
    alone had gone without the patches; a run of neither pays no import."""
    if "triton" in sys.modules or os.environ.get("TRITON_INTERPRET") == "1":
        from gpu_worker.pipeline import interpreter_fix
        interpreter_fix.install_speedups()


@pytest.fixture(autouse=True)
def _audit_anchor_of_this_test(tmp_path, settings):
    """Each test anchors its committed events in a file of its own (loop/audit.py): tests flush the events
    they wrote, so one anchor shared by the session would name events that are gone."""
    settings.ARK_AUDIT_ANCHOR = str(tmp_path / "audit-anchor.log")


@pytest.fixture(autouse=True)
def _retiming_rule(request, settings):
    """The re-timing rule before promotion (loop/services/confirmations.py) is on only in tests marked
    `retiming`: the suite's other promotions test routes and review, on reports nobody re-timed."""
    settings.ARK_PROMOTION_NEEDS_RETIMING = request.node.get_closest_marker("retiming") is not None



@pytest.fixture(autouse=True)
def _a_channel_layer_per_test(request):
    """The process's channel layer is built anew for each test. A served process has one event loop and one
    layer for its life; tests each have loops of their own (an async test's, every async_to_sync call's),
    and channels_redis keeps per-loop state in the layer (a receive lock bound to the loop that took it, a
    count of receivers in flight) that a test ending mid-receive leaves behind for the next one. An async
    test also ends its own tasks first (_async_test_ends_its_tasks)."""
    from channels.layers import channel_layers

    channel_layers.backends.clear()
    if inspect.iscoroutinefunction(getattr(request, "function", None)):
        request.getfixturevalue("_async_test_ends_its_tasks")
    yield
    channel_layers.backends.clear()


def tasks_left() -> list:
    """The running loop's tasks that have not ended, the calling one left out."""
    me = asyncio.current_task()
    return [task for task in asyncio.all_tasks() if task is not me and not task.done()]


@pytest.fixture
async def _async_test_ends_its_tasks():
    """Before pytest-asyncio closes an async test's loop, the tasks the test left (a consumer still listening on
    the channel layer, its receive from Redis) are cancelled until they end. The loop's close cancels them
    once and then waits without a bound: a cancellation that is lost (channels_redis's receive loops over
    5 s waits on Redis and went on) held a CI run for good, in the teardown of
    test_round_trip.py::test_the_websocket_refuses_foreign_origins, a test whose refused socket leaves the
    denying consumer listening. The product's layer now raises such a lost cancellation within one wait
    (console/channel_layer.py); here each left task is still cancelled again every second until it ends, so
    that no test's teardown waits without a bound."""
    yield
    deadline = time.monotonic() + 60
    while left := tasks_left():
        if time.monotonic() > deadline:
            raise AssertionError(f"tasks the test left would not end when cancelled: {left}")
        for task in left:
            task.cancel()
        await asyncio.wait(left, timeout=1)


@pytest.fixture(autouse=True, scope="session")
def _audit_unlocked_for_teardown():
    """Test teardown flushes tables; the event log's triggers allow that only while unlocked."""
    from django.core.management.commands import flush

    from loop.audit import audit_unlocked

    original = flush.Command.handle

    def handle(self, *args, **kwargs):
        with audit_unlocked():
            return original(self, *args, **kwargs)

    flush.Command.handle = handle
    yield
    flush.Command.handle = original


@pytest.fixture(autouse=True, scope="session")
def _one_round_password_hashes():
    """Passwords hashed here take one PBKDF2 round, not the production 10^6 (~0.4 CPU-seconds each: the fixture
    people alone cost the suite ~100 CPU-seconds). The stored hash keeps its algorithm and says its round count,
    so a console a test starts in a process of its own verifies it as it would any other (and re-hashes it at
    the production count on login)."""
    from django.contrib.auth.hashers import PBKDF2PasswordHasher

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(PBKDF2PasswordHasher, "iterations", 1)
        yield


def _user(django_user_model, name, groups=(), **extra):
    from django.contrib.auth.models import Group

    from loop.roles import ensure_groups

    ensure_groups()
    user = django_user_model.objects.create_user(username=name, password=f"{name}-password-1", **extra)
    for group in groups:
        user.groups.add(Group.objects.get(name=group))
    return user


@pytest.fixture
def alice(django_user_model):
    return _user(django_user_model, "alice", ["reviewer"])


@pytest.fixture
def bob(django_user_model):
    return _user(django_user_model, "bob", ["reviewer"])


@pytest.fixture
def dana(django_user_model):
    return _user(django_user_model, "dana", ["deployer"])


@pytest.fixture
def charlie(django_user_model):
    return _user(django_user_model, "charlie", ["viewer"])


def database_url_for_subprocess() -> str:
    """The URL of the test database as this process sees it, for workers started by a test."""
    from django.db import connection

    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    auth = s["USER"] + (f":{s['PASSWORD']}" if s.get("PASSWORD") else "")
    return f"postgres://{auth}@{s.get('HOST') or '127.0.0.1'}:{s.get('PORT') or 5432}/{s['NAME']}"


def subprocess_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    # the re-timing rule is off in the processes tests start, as in the tests themselves (_retiming_rule)
    env.update({"DATABASE_URL": database_url_for_subprocess(), "PYTHONUNBUFFERED": "1",
                "ARK_PROMOTION_NEEDS_RETIMING": "0"}, **extra)
    return env


# A test run killed mid-way (timeout, Ctrl-C) must not leave its workers consuming queues: each child gets
# SIGTERM when its parent dies (PR_SET_PDEATHSIG, set by util-linux's setpriv before it execs the command).
# Not a preexec_fn: that runs Python between fork and exec in a test process that has other threads (xdist's,
# asgiref's, a database pool's), where a lock one of them held at the fork is never released in the child.
DIE_WITH_PARENT = ["setpriv", "--pdeathsig", "TERM", "--"]


class Proc:
    """A child process with its output in a file, stopped (and reaped) at teardown."""

    def __init__(self, args, env, log_path: Path):
        self.log_path = log_path
        self.log = open(log_path, "wb")
        self.popen = subprocess.Popen([*DIE_WITH_PARENT, *args], cwd=ROOT, env=env, stdout=self.log,
                                      stderr=subprocess.STDOUT, start_new_session=True)

    def output(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")

    def wait_for_output(self, text: str, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if text in self.output():
                return
            if self.popen.poll() is not None:
                break
            time.sleep(0.2)
        raise AssertionError(f"{text!r} never appeared; output:\n{self.output()[-4000:]}")

    def kill(self, sig=9) -> None:
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, sig)
            self.popen.wait(timeout=30)

    def stop(self) -> None:
        try:  # the whole group, even when its leader is gone: a worker killed mid-test leaves its beat child
            os.killpg(self.popen.pid, 15)
        except ProcessLookupError:
            pass
        if self.popen.poll() is None:
            try:
                self.popen.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()


@pytest.fixture
def start_process(request, tmp_path):
    # The processes stop before the test's database is flushed, whatever order the test named its fixtures in
    # (a fixture set up earlier is torn down later): a worker still running takes row locks that the flush's
    # TRUNCATE waits for, and writes rows after it.
    if "transactional_db" in request.fixturenames:
        request.getfixturevalue("transactional_db")
    procs = []

    def start(args, *, name: str, **env_extra) -> Proc:
        proc = Proc(args, subprocess_env(**env_extra), tmp_path / f"{name}.log")
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.stop()


@pytest.fixture
def loop_worker(transactional_db, start_process):
    """A real Celery worker on the `loop` queue, against the test database."""
    proc = start_process([sys.executable, "-m", "celery", "-A", "console", "worker", "-Q", os.environ["ARK_LOOP_QUEUE"],
                          "--pool=solo", "--without-heartbeat", "--without-gossip", "--without-mingle",
                          "-n", f"loop-{uuid.uuid4().hex[:6]}@%h", "--loglevel=INFO"], name="loop-worker")
    proc.wait_for_output("ready.")
    return proc


@pytest.fixture
def gpu_hardware():
    """A queue name of its own for each test, so that no stray worker answers."""
    return f"cputest{uuid.uuid4().hex[:8]}"


# A real GPU-side Celery worker (`celery -A gpu_worker.celery_app worker ...` follows), for tests of the loop
# around it rather than of verification: its evaluations verify the target's two smallest shapes
# (verify_two_smallest_shapes, below), since the whole range in Triton's interpreter takes minutes per candidate.
GPU_WORKER_CMD = [sys.executable, "-c", (
    "import sys\n"
    "from tests.conftest import verify_two_smallest_shapes\n"
    "verify_two_smallest_shapes()\n"
    "from celery.__main__ import main\n"
    "sys.argv[0] = 'celery'\n"
    "sys.exit(main())\n")]


@pytest.fixture
def gpu_worker(transactional_db, start_process, gpu_hardware):
    """A real GPU-side Celery worker in CPU mode consuming gpu.<gpu_hardware>."""
    proc = start_process([*GPU_WORKER_CMD, "-A", "gpu_worker.celery_app", "worker",
                          "-Q", f"gpu.{gpu_hardware}", "--pool=solo", "--without-heartbeat", "--without-gossip",
                          "--without-mingle", "-n", f"gpu-{gpu_hardware}@%h", "--loglevel=INFO"],
                         name="gpu-worker", ARK_HARDWARE=gpu_hardware, ARK_HEARTBEAT_INTERVAL_S="1")
    proc.wait_for_output("ready.")
    return proc


def verify_two_smallest_shapes(setattr=setattr) -> None:
    """For tests of the sandbox rather than of verification: a child verifies the target's two smallest
    shapes instead of the whole range, which in Triton's interpreter takes minutes (dsa_topk's two are one
    full row and five ragged rows shorter than k, so padding is exercised). test_seeds and test_cli run
    seeds over the whole range. Also called by tests that start the CLI in a process of its own."""
    from gpu_worker.targets.base import TargetSpec

    whole_range = TargetSpec.verify_shapes

    def two_smallest(self, *args, **kwargs):
        shapes = whole_range(self, *args, **kwargs)
        return sorted(shapes, key=lambda shape: math.prod(v for v in shape.values() if isinstance(v, int)))[:2]

    setattr(TargetSpec, "verify_shapes", two_smallest)


@pytest.fixture
def few_verify_shapes(monkeypatch):
    verify_two_smallest_shapes(monkeypatch.setattr)


def wait_until(predicate, timeout_s: float = 30.0, interval_s: float = 0.1):
    """Poll until predicate() is truthy (event-driven waits on real processes, not timing asserts)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval_s)
    raise AssertionError(f"condition not met within {timeout_s}s: {predicate}")
