"""Loaded by scripts/test with `-p tests.parallel`, before Django reads its settings: under pytest-xdist each
worker (gw0, gw1, ...) gets a Redis database and a loop queue of its own, so that one worker's Celery
messages, attempt fences and live events never reach another worker's tests (each already has a database of
its own: pytest-django suffixes the test database's name per worker). Without xdist it does nothing.

It also runs the tests that start candidates in sandboxed children (marked `slow`: seconds to minutes each in
Triton's interpreter) first, so that the workers take the long tests early and share out the short ones at the
end, instead of one worker finishing a long test alone."""

import os

import pytest


def redis_database(offset: int) -> str:
    """The suite's Redis URL (scripts/test: database 9) moved `offset` databases on, of Redis's 16."""
    base, _, db = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/9").rpartition("/")
    return f"{base}/{(int(db or 0) + offset) % 16}"


worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if worker.startswith("gw"):
    os.environ["REDIS_URL"] = redis_database(1 + int(worker[2:]))
    os.environ["ARK_LOOP_QUEUE"] = f"loop.test{os.getpid()}"

_DATABASE_FIXTURES = {"db", "transactional_db", "django_db_setup", "live_server"}


def _long_without_database(item) -> bool:
    return bool(item.get_closest_marker("slow")) and not item.get_closest_marker("django_db") and not (
        _DATABASE_FIXTURES & set(getattr(item, "fixturenames", ())))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    """After pytest-django has put the database tests in Django's order: only tests without a database move,
    so that order holds. A stable sort, the same on every worker."""
    if worker.startswith("gw"):
        items.sort(key=lambda item: not _long_without_database(item))
