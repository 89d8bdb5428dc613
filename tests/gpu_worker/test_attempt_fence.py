"""The attempt fence: a GPU worker skips an evaluation message of an attempt older than the one the loop last
published (a message re-delivered after its worker died, for a candidate re-queued since). Real Redis."""

import os
import uuid

import pytest
import redis

from gpu_worker import tasks
from gpu_worker.queues import Task, attempt_key

URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/9")


@pytest.fixture
def worker(monkeypatch):
    """tasks.evaluate with the pipeline and the loop replaced by recorders; returns (run, calls, sent, key)."""
    calls, sent = [], []

    def pipeline(spec, on_progress):
        calls.append(spec["attempt"])
        return {"schema": "ark.report/1", "attempt": spec["attempt"], "verdict": {"status": "pass"}}

    monkeypatch.setattr("gpu_worker.pipeline.evaluate", pipeline)
    monkeypatch.setattr(tasks, "send_to_loop", lambda name, *args: sent.append((name, args[1])))
    monkeypatch.setattr(tasks, "worker_identity", lambda: {"name": "gpu-test"})
    monkeypatch.setattr(tasks, "BROKER_URL", URL)
    candidate_id = uuid.uuid4().int % 10**9
    client = redis.Redis.from_url(URL)
    yield (lambda attempt: tasks.evaluate.run({"candidate_id": candidate_id, "attempt": attempt})), calls, sent, \
        (client, attempt_key(candidate_id))
    client.delete(attempt_key(candidate_id))


def test_an_older_attempt_than_the_published_one_is_not_evaluated(worker):
    run, calls, sent, (client, key) = worker
    client.set(key, 3)
    run(2)
    assert calls == [] and sent == []
    run(3)
    assert calls == [3] and sent == [(Task.LOOP_REPORT, 3)]


def test_without_a_fence_or_with_an_unreadable_broker_the_evaluation_runs(worker, monkeypatch):
    run, calls, sent, _ = worker
    run(1)                                                  # no key: as before the fence existed
    monkeypatch.setattr(tasks, "BROKER_URL", "redis://127.0.0.1:1/0")  # nothing listens there
    run(2)
    assert calls == [1, 2] and [a for _, a in sent] == [1, 2]
