"""Loaded by scripts/test with `-p tests.parallel`, before Django reads its settings: under pytest-xdist each
worker (gw0, gw1, ...) gets a Redis database and a loop queue of its own, so that one worker's Celery
messages, attempt fences and live events never reach another worker's tests (each already has a database of
its own: pytest-django suffixes the test database's name per worker). Without xdist it does nothing."""

import os

worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if worker.startswith("gw"):
    base, _, db = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/9").rpartition("/")
    os.environ["REDIS_URL"] = f"{base}/{(int(db or 0) + 1 + int(worker[2:])) % 16}"
    os.environ["ARK_LOOP_QUEUE"] = f"loop.test{os.getpid()}"
