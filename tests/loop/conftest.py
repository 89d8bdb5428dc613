"""Fixtures for the loop's tests: a target, a thesis, runs, live workers, and a loop worker whose
leases and heartbeat timeout are short enough for a test to see a worker die."""

import os
import sys
import uuid

import pytest
from django.utils import timezone

ADD_RMSNORM_AXES = {"tokens": [1, 16384], "hidden": [2048, 8192]}
DSA_TOPK_AXES = {"rows": [1, 128], "n_ctx": [1000, 262144]}


@pytest.fixture
def topk_target(db):
    from loop.models import Target

    return Target.objects.create(name="dsa_topk", axes=DSA_TOPK_AXES, dsls=["triton"], e2e_slot="indexer.topk")


@pytest.fixture
def rmsnorm_target(db):
    from loop.models import Target

    return Target.objects.create(name="add_rmsnorm", axes=ADD_RMSNORM_AXES, dsls=["triton"])


@pytest.fixture
def thesis(alice, topk_target):
    from loop.models import Thesis

    return Thesis.objects.create(title="Incremental top-k", body="Keep only the running top-k.", target=topk_target,
                                 hardware="h200", model="deepseek-v3.2", owner=alice, constraints="exact as a set")


@pytest.fixture
def make_run(alice, thesis):
    from loop.services.runs import run_start

    def make(**kw):
        kw.setdefault("proposer", "human")
        kw.setdefault("actor", alice)
        kw.setdefault("thesis", thesis)
        return run_start(**kw)

    return make


@pytest.fixture
def live_worker(db):
    """A GPU worker row whose heartbeat is fresh: one slot of capacity on h200."""
    from loop.models import Worker

    def make(name=None, hardware="h200"):
        return Worker.objects.create(name=name or f"w-{uuid.uuid4().hex[:6]}", hardware=hardware,
                                     last_heartbeat=timezone.now())

    return make


@pytest.fixture
def loop_worker_short_leases(transactional_db, start_process):
    """A real loop worker with a 4 s lease and a 3 s heartbeat timeout (GPU workers beat every 1 s)."""
    proc = start_process([sys.executable, "-m", "celery", "-A", "console", "worker", "-Q", os.environ["ARK_LOOP_QUEUE"],
                          "--pool=solo", "--without-heartbeat", "--without-gossip", "--without-mingle",
                          "-n", f"loop-{uuid.uuid4().hex[:6]}@%h", "--loglevel=INFO"], name="loop-worker",
                         ARK_LEASE_S="4", ARK_HEARTBEAT_TIMEOUT_S="3")
    proc.wait_for_output("ready.")
    return proc
