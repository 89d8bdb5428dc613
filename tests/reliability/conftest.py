"""Fault injection: real processes (loop worker with its beat, GPU workers in CPU mode, a private
redis-server, daphne) that a test kills, stops and restarts. Short leases so that a dead worker is
noticed in seconds; the reaper runs from the loop worker's beat, as in the Procfile."""

import os
import socket
import sys
import uuid
from pathlib import Path

import pytest
import redis
from celery import Celery

from gpu_worker.broker import BROKER_TRANSPORT_OPTIONS
from gpu_worker.candidate_params import set_params
from tests.conftest import GPU_WORKER_CMD, wait_until

ROOT = Path(__file__).resolve().parents[2]
SEED = (ROOT / "gpu_worker/candidates/add_rmsnorm/seed.py").read_text()
FINAL = {"kept", "reverted", "vetoed", "error"}
# What the loop side needs to notice a dead GPU worker within seconds (GPU workers beat every 1 s).
FAST_LOOP_ENV = {"ARK_LEASE_S": "4", "ARK_HEARTBEAT_TIMEOUT_S": "3", "ARK_QUEUE_LEASE_S": "20",
                 "ARK_REAP_INTERVAL_S": "2"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The seed at four rows a program: these tests are about processes, not the kernel, and the interpreter runs a
# quarter of the programs (its verify took 9 s on a CPU instead of 22: 8448 tokens, one program per row)
FOUR_ROWS = set_params(SEED, ["ROWS=4"])[0]
assert FOUR_ROWS != SEED, "the seed already runs four rows a program: FOUR_ROWS is the seed itself"


def variant(i: int) -> str:
    """The add_rmsnorm seed at four rows a program, made a distinct source (a duplicate source is refused at
    submit)."""
    return FOUR_ROWS + f"\n# reliability variant {i}\n"


@pytest.fixture
def fast_leases(settings):
    """This process's view of liveness matches the loop worker's."""
    settings.ARK_HEARTBEAT_TIMEOUT_S = 3
    settings.ARK_LEASE_S = 4
    settings.ARK_QUEUE_LEASE_S = 20


@pytest.fixture
def start_loop_worker(transactional_db, start_process, tmp_path):
    """A loop worker with its beat (-B: the reaper and the outbox relay), as the Procfile runs it."""
    def start(name="loop-worker", wrapper=None, **env):
        """`wrapper`: a script run instead of `-m celery` (it patches a fault in, then runs celery)."""
        head = [sys.executable, str(wrapper)] if wrapper else [sys.executable, "-m", "celery"]
        args = head + ["-A", "console", "worker", "-Q", os.environ["ARK_LOOP_QUEUE"], "--pool=solo", "-B",
                       "-s", str(tmp_path / f"beat-{uuid.uuid4().hex[:6]}"), "--without-heartbeat",
                       "--without-gossip", "--without-mingle", "-n", f"{name}-{uuid.uuid4().hex[:6]}@%h",
                       "--loglevel=INFO"]
        proc = start_process(args, name=f"{name}-{uuid.uuid4().hex[:4]}", **{**FAST_LOOP_ENV, **env})
        proc.wait_for_output("ready.")
        return proc

    return start


@pytest.fixture
def start_gpu_worker(transactional_db, start_process, gpu_hardware, tmp_path):
    """A GPU worker in CPU mode on gpu.<gpu_hardware>; its evaluation scratch lives under tmp_path/scratch
    so that a test can find a sandboxed child that outlived its worker."""
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)

    def start(name="gpu-worker", **env):
        proc = start_process([*GPU_WORKER_CMD, "-A", "gpu_worker.celery_app", "worker",
                              "-Q", f"gpu.{gpu_hardware}", "--pool=solo", "--without-heartbeat", "--without-gossip",
                              "--without-mingle", "-n", f"{name}-{uuid.uuid4().hex[:6]}@%h", "--loglevel=INFO"],
                             name=f"{name}-{uuid.uuid4().hex[:4]}", ARK_HARDWARE=gpu_hardware,
                             ARK_HEARTBEAT_INTERVAL_S="1", TMPDIR=str(scratch), **env)
        proc.wait_for_output("ready.")
        return proc

    start.scratch = scratch
    return start


@pytest.fixture
def human_run(alice, gpu_hardware, fast_leases):
    """A run of `n` person-written add_rmsnorm candidates on this test's hardware queue; it finishes
    when all are decided (budget n; plateau out of reach)."""
    from loop.models import Target, Thesis
    from loop.proposers.human import candidate_submit_human
    from loop.services.runs import run_start
    from loop.services.targets import target_sync

    def start(n: int, max_attempts: int = 3):
        target_sync()
        thesis = Thesis.objects.create(title="Fused add + RMSNorm", body="One pass over the data.", owner=alice,
                                       target=Target.objects.get(name="add_rmsnorm"), hardware=gpu_hardware)
        run = run_start(actor=alice, thesis=thesis, proposer="human", budget_candidates=n,
                        policy={"plateau_k": n + 1, "max_attempts": max_attempts})
        for i in range(n):
            candidate_submit_human(run=run, actor=alice, source=variant(i), note=f"variant {i}")
        return run

    return start


def live_children(scratch: Path) -> list[int]:
    """Sandboxed children (or anything else) still running with this test's scratch in their command line."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().split(")")[1].split()[0]
        except OSError:
            continue
        if str(scratch) in cmdline and "gpu_worker.pipeline.child" in cmdline and state != "Z":
            pids.append(int(entry.name))
    return pids


def assert_run_consistent(run, *, expect_candidates: int):
    """Every candidate final, none lost, none decided twice, every report counted once."""
    from loop.audit import verify_chain
    from loop.models import Candidate, Decision, Evaluation, Event

    run.refresh_from_db()
    candidates = list(Candidate.objects.filter(run=run).order_by("number"))
    assert len(candidates) == expect_candidates
    for c in candidates:
        assert c.status in FINAL, (c.number, c.status, c.stage)
        decisions = list(Decision.objects.filter(candidate=c).values_list("verdict", flat=True))
        assert len(decisions) == 1, (c.number, decisions)
        attempts = list(Evaluation.objects.filter(candidate=c).values_list("attempt", flat=True))
        assert len(attempts) == len(set(attempts)) and all(1 <= a <= c.attempt for a in attempts), (c.number, attempts)
        if c.status == "error" and c.decisions.get().actor == "reaper":
            assert not attempts or max(attempts) < c.attempt
        else:
            assert attempts and max(attempts) == c.attempt, (c.number, attempts, c.attempt)
        reported = list(Event.objects.filter(type="candidate.reported", subject_id=str(c.pk))
                        .values_list("payload__attempt", flat=True))
        assert sorted(reported) == sorted(attempts), (c.number, reported, attempts)
    total = sum(Evaluation.objects.filter(candidate__run=run).values_list("gpu_seconds", flat=True))
    assert abs(run.gpu_seconds_used - total) < 1e-6
    assert Event.objects.filter(run_id=run.pk, type="run.finished").count() == 1
    assert verify_chain() == []
    return candidates


def wait_finished(run, timeout_s: float):
    from loop.models import Run

    return wait_until(lambda: Run.objects.filter(pk=run.pk, status="finished").first(), timeout_s=timeout_s,
                      interval_s=0.5)


@pytest.fixture
def own_redis(start_process):
    """A redis-server of this test's own on a free port; `.restart()` stops it (its data is lost) and
    starts it again on the same port."""
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"

    class Server:
        def __init__(self):
            self.url, self.port, self.proc = url, port, None
            self.start()

        def start(self):
            self.proc = start_process(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                       "--appendonly", "no", "--daemonize", "no"], name=f"redis-{port}")
            wait_until(self.up, timeout_s=20)

        def up(self):
            try:
                return redis.Redis.from_url(url, socket_timeout=1).ping()
            except redis.RedisError:
                return False

        def stop(self):
            self.proc.stop()
            assert not self.up()

    return Server()


@pytest.fixture
def publish_to(monkeypatch):
    """This process's outbox publishes to the given broker (the workers under test use it)."""
    from loop.services import outbox

    apps = []

    def use(url):
        app = Celery("reliability-test", broker=url, set_as_current=False)
        app.conf.broker_connection_retry_on_startup = True
        app.conf.broker_transport_options = BROKER_TRANSPORT_OPTIONS  # as the loop's app (console/settings.py)
        apps.append(app)
        monkeypatch.setattr(outbox, "current_app", app)

    yield use
    for app in apps:
        app.close()
