"""PostgreSQL with a small connection limit under load: the console (console.serve, as deployed, its
connection pool sized to the limit) answers each request with its page or a clean 503 "try again", never
a 500 or a dropped connection, holds no more connections than its pool, and serves normally once the load
is gone. A dedicated role with CONNECTION LIMIT 3 and a database of its own, dropped at the end; 50
concurrent requests on loopback."""

import http.client
import os
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from tests.conftest import wait_until
from tests.reliability.conftest import ROOT, free_port

PG = {"host": "127.0.0.1", "port": 5432, "user": "postgres", "dbname": "postgres"}
LIMIT = 3
REQUESTS = 50


def _admin():
    # PostgreSQL is a required service of the suite (scripts/test starts it): its absence is a failure.
    try:
        return psycopg.connect(**PG, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        pytest.fail(f"no PostgreSQL at 127.0.0.1:5432 (scripts/test starts it): {exc}")


@pytest.fixture
def limited_database():
    """A role allowed LIMIT connections, its own migrated database with one user and a live session."""
    name = f"ark_rel_{uuid.uuid4().hex[:8]}"
    admin = _admin()
    admin.execute(f"CREATE ROLE {name} LOGIN CONNECTION LIMIT {LIMIT}")
    admin.execute(f"CREATE DATABASE {name} OWNER {name}")
    url = f"postgres://{name}@127.0.0.1:5432/{name}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(DATABASE_URL=url, PYTHONUNBUFFERED="1")
    try:
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True,
                       timeout=300)
        session = subprocess.run([sys.executable, "manage.py", "shell", "-c", (
            "from django.contrib.auth import get_user_model\n"
            "from django.contrib.sessions.backends.db import SessionStore\n"
            "u = get_user_model().objects.create_user('erin', password='erin-password-1')\n"
            "s = SessionStore(); s['_auth_user_id'] = str(u.pk)\n"
            "s['_auth_user_backend'] = 'console.auth.PermissionsInOneQuery'\n"
            "s['_auth_user_hash'] = u.get_session_auth_hash(); s.create(); print(s.session_key)")],
            cwd=ROOT, env=env, check=True, timeout=120, capture_output=True, text=True).stdout.split()[-1]
        yield {"url": url, "session": session, "role": name}
    finally:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.execute(f"DROP ROLE IF EXISTS {name}")
        admin.close()


def _get(port: int, path: str, session: str):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("GET", path, headers={"Cookie": f"sessionid={session}", "Host": "127.0.0.1"})
        response = conn.getresponse()
        return response.status, response.read().decode(errors="replace")
    except (OSError, http.client.HTTPException) as exc:  # reset, refused, truncated: a crash to the client
        return "dropped", repr(exc)
    finally:
        conn.close()


def _burst(limited_database, start_process, **env):
    port = free_port()
    env.setdefault("ARK_DB_POOL_MAX", str(LIMIT))
    server = start_process([sys.executable, "-m", "console.serve", "--bind", f"127.0.0.1:{port}", "--workers", "1"],
                           name="console", DATABASE_URL=limited_database["url"], ARK_DB_POOL_TIMEOUT_S="2", **env)
    session = limited_database["session"]
    wait_until(lambda: _get(port, "/healthz", session)[0] == 200, timeout_s=60, interval_s=0.3)
    assert _get(port, "/", session)[0] == 200
    with ThreadPoolExecutor(max_workers=REQUESTS) as pool:
        results = list(pool.map(lambda _: _get(port, "/", session), range(REQUESTS)))
    statuses = [status for status, _ in results]
    print("statuses:", {s: statuses.count(s) for s in set(statuses)})
    return port, session, server, results


def test_a_small_connection_limit_gives_pages_or_503_never_a_crash(limited_database, start_process):
    _port, _session, server, results = _burst(limited_database, start_process)
    statuses = [status for status, _ in results]
    assert set(statuses) <= {200, 503}, [(s, body[:300]) for s, body in results if s not in (200, 503)][:3]
    assert statuses.count(200) >= 1
    for status, body in results:
        if status == 503:
            assert "try again" in body.lower()
    assert server.popen.poll() is None


@pytest.mark.parametrize("debug", ["true", "false"])
def test_the_console_serves_again_once_the_load_is_gone(limited_database, start_process, debug):
    """The 500 page that Django builds (and the middleware turns into a 503) must not open connections of its
    own: under ASGI it is built in a thread that no request_finished cleans up (docs/reliability.md, row 4).
    Both pages: Django's debug page (DEBUG on) and ours (DEBUG off)."""
    port, session, _server, _results = _burst(limited_database, start_process, DJANGO_DEBUG=debug)
    admin = _admin()
    try:
        held = lambda: admin.execute("SELECT count(*) FROM pg_stat_activity WHERE usename = %s",
                                     [limited_database["role"]]).fetchone()[0]
        # Connections are the pool's (docs/scaling.md): within its bound and idle once the load is gone
        # (none left in a transaction by an error page, none opened beside the pool)...
        busy = lambda: admin.execute("SELECT count(*) FROM pg_stat_activity WHERE usename = %s AND state <> 'idle'",
                                     [limited_database["role"]]).fetchone()[0]
        try:
            wait_until(lambda: held() <= LIMIT and busy() == 0, timeout_s=20)
        except AssertionError:
            rows = admin.execute("SELECT state, left(query, 80) FROM pg_stat_activity WHERE usename = %s",
                                 [limited_database["role"]]).fetchall()
            raise AssertionError(f"connections held after the load: {rows}") from None
        # ...so the console serves normally again once the load is gone.
        assert _get(port, "/", session)[0] == 200
    finally:
        admin.close()
