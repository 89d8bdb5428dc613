"""The console under the product's ASGI server (console.serve, as the Procfile runs it) against the test database,
driven by Debian's Chromium through Playwright."""

import os
import socket
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.parallel import redis_database

ROOT = Path(__file__).resolve().parents[2]
# The pages the suite walks through are photographed into var/screenshots (ignored by git), so a test run leaves
# the tree as it found it; ARK_SCREENSHOTS=docs writes them over the README's images instead (docs/README.md).
SCREENSHOTS = ROOT / ("docs" if os.environ.get("ARK_SCREENSHOTS") == "docs" else "var") / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="session", autouse=True)
def _orm_beside_playwright():
    """Playwright's sync API keeps an event loop in this thread: Django's ORM refuses to run next to it unless
    told it is safe (it is: the test drives one thing at a time). Session-scoped and autouse, so it is in place
    before the session's database setup, which pytest may order after Playwright's session fixtures (it does
    with pytest 9 and pytest-playwright 0.10). Only for these tests; the server process gets the check back
    (below)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        yield


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_ARGS, "headless": True}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    return {**browser_context_args, "viewport": {"width": 1400, "height": 1000}, "accept_downloads": True}


@pytest.fixture(autouse=True)
def _no_csp_violations(request):
    """Every page runs under the console's Content-Security-Policy (console/settings.py, docs/security.md):
    a violation Chromium reports ("Refused to ...", "Content Security Policy") fails the test that caused it."""
    if "page" not in request.fixturenames:
        yield
        return
    page = request.getfixturevalue("page")
    refused = []

    def note(message):
        if "Content Security Policy" in message.text or message.text.startswith("Refused to"):
            refused.append(message.text)

    page.on("console", note)
    yield refused
    assert not refused, f"CSP violations: {refused}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(start, **env) -> tuple[str, object]:
    """Start the console as the product serves it (console.serve: gunicorn + a uvicorn worker; one, to start fast)
    on a free port and wait until it answers; its base URL and process."""
    from tests.conftest import wait_until

    port = _free_port()
    server = start([sys.executable, "-m", "console.serve", "--bind", f"127.0.0.1:{port}", "--workers", "1"],
                   name="console", DJANGO_DEBUG="0", DJANGO_ALLOW_ASYNC_UNSAFE="", **env)
    url = f"http://127.0.0.1:{port}"

    def up():
        if server.popen.poll() is not None:
            raise AssertionError(f"the console exited:\n{server.output()[-3000:]}")
        try:
            return urllib.request.urlopen(url + "/healthz", timeout=2).status == 200
        except OSError:
            return False

    wait_until(up, timeout_s=60)
    return url, server


@pytest.fixture
def console_url(request, transactional_db, start_process):
    """The console as the product serves it, on a free port, against the test database; its base URL. Without a loop
    worker in the test, the tasks it publishes go to an in-memory broker instead of the shared Redis."""
    broker = {} if "loop_worker" in request.fixturenames else {"CELERY_BROKER_URL": "memory://"}
    return _serve(start_process, **broker)[0]


_writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="db-writer")


def in_thread(fn, *args, **kwargs):
    """Run a service call off the Playwright thread: its event broadcast (async_to_sync) needs a thread
    with no event loop, as in a real Celery worker."""
    from django.db import connection

    def call():
        try:
            return fn(*args, **kwargs)
        finally:
            connection.close()

    return _writer.submit(call).result(timeout=60)


def login(page, base_url: str, username: str) -> None:
    page.goto(f"{base_url}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", f"{username}-password-1")
    page.click("button[type=submit]")
    page.wait_for_selector('[data-testid="whoami"]')


def wait_live(page) -> None:
    """The page's websocket is open (live.js marks the body)."""
    page.wait_for_selector("body[data-ws-open]", state="attached")


def screenshot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


class _HeldTasks:
    """Stands in for the Celery app in the outbox relay of a test with no loop worker: a message left in
    the shared broker would reach the next test run's loop worker."""

    def __init__(self):
        self.sent = []

    def send_task(self, name, args=None, queue=None, **kwargs):
        self.sent.append((name, queue, args))


@pytest.fixture(autouse=True)
def held_tasks(request, monkeypatch):
    if "loop_worker" in request.fixturenames:
        return None
    from loop.services import outbox

    held = _HeldTasks()
    monkeypatch.setattr(outbox, "current_app", held)
    return held


# The idle page (issue 23): a page that holds its websocket for two minutes with nothing to say. It is opened
# when the browser session starts and checked by test_first_hour.py::test_an_idle_page_keeps_its_socket, which
# runs last, so the hold costs the suite little; run alone, that test waits out the two minutes itself.
IDLE_TEST = "test_an_idle_page_keeps_its_socket"
IDLE_HOLD_S = 120.0


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """The idle-page test runs after every other test, whatever order the files and tests were collected in."""
    idle = [item for item in items if item.originalname == IDLE_TEST]
    items[:] = [item for item in items if item.originalname != IDLE_TEST] + idle


class IdlePage:
    """The page, when its socket opened, the sequence number it started from, its console, or why it could not
    be opened (reported by the idle test itself, not as an error of whichever test happened to run first)."""

    def __init__(self):
        self.page = self.opened = self.last_seq = self.run_url = self.server = None
        self.error = None


def _idle_seed() -> int:
    """A person and a run of their own, in the session's test database: their ids are taken there for the
    session (a flush does not reuse ids), so no other test's run shares the run's live group."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.db import connection

    from loop.roles import ensure_groups
    from loop.services import outbox
    from tests.console import builders

    if connection.vendor != "sqlite" or connection.settings_dict["NAME"] != connection.settings_dict["TEST"]["NAME"]:
        raise RuntimeError("the idle page's console runs on a copy of the SQLite test database; this session's "
                           f"database is {connection.vendor} {connection.settings_dict['NAME']}")
    ensure_groups()
    person = get_user_model().objects.create_user(username="ida", password="ida-password-1")
    person.groups.add(Group.objects.get(name="reviewer"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(outbox, "current_app", _HeldTasks())  # the run's first tasks go nowhere
        return builders.make_run(person).pk


def _idle_database(copy: Path) -> None:
    """The test database as it is now, copied for the idle page's console, which outlives every test's flush."""
    import sqlite3

    from django.db import connection

    source, target = sqlite3.connect(connection.settings_dict["NAME"]), sqlite3.connect(copy)
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()


@pytest.fixture(scope="session", autouse=True)
def idle_page(request, browser, browser_context_args, django_db_setup, django_db_blocker, tmp_path_factory,
              _audit_unlocked_for_teardown, _orm_beside_playwright):
    """Opened before the session's first test, in a browser context and a console of its own, on a copy of the
    database with a run no other test touches: nothing reaches its socket until the idle test acts."""
    if not any(item.originalname == IDLE_TEST for item in request.session.items):
        yield None
        return
    from django.core.management import call_command

    from tests.conftest import Proc, subprocess_env

    idle, folder, context, procs = IdlePage(), tmp_path_factory.mktemp("idle-page"), None, []
    try:
        with django_db_blocker.unblock():
            run_pk = in_thread(_idle_seed)
            in_thread(_idle_database, folder / "idle.sqlite3")
            # the session's tests start clean, as each test's teardown leaves it: ids are not reused
            in_thread(call_command, "flush", interactive=False, verbosity=0, reset_sequences=False)

        def start(args, *, name, **env):
            procs.append(Proc(args, subprocess_env(**env), folder / f"{name}.log"))
            return procs[-1]

        # A Redis database of its own for its channel layer (the one below the suite's: scripts/test gives the
        # browser suite 9, the xdist workers 10 and up, the SQLite pass 15): a message for a run of the same id
        # from any other process on the suite's database reached it once (a CI run: last-seq 3 became 26).
        url, idle.server = _serve(start, DATABASE_URL=f"sqlite:///{folder / 'idle.sqlite3'}",
                                  CELERY_BROKER_URL="memory://", REDIS_URL=redis_database(-1))
        context = browser.new_context(**browser_context_args)
        idle.page = context.new_page()
        login(idle.page, url, "ida")
        idle.run_url = f"{url}/runs/{run_pk}/"
        idle.page.goto(idle.run_url)
        wait_live(idle.page)
        idle.opened = time.monotonic()
        idle.last_seq = idle.page.evaluate("document.body.dataset.lastSeq")
    except Exception as error:  # noqa: BLE001 - reported by the idle test
        idle.error = f"the idle page could not be opened: {error!r}"
    yield idle
    if context is not None:
        context.close()
    for proc in procs:
        proc.stop()
