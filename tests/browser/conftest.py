"""The console under the product's ASGI server (console.serve, as the Procfile runs it) against the test database,
driven by Debian's Chromium through Playwright."""

import os
import socket
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "docs" / "screenshots"
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


@pytest.fixture
def console_url(request, transactional_db, start_process):
    """The console as the product serves it, on a free port, against the test database; its base URL. Without a loop
    worker in the test, the tasks it publishes go to an in-memory broker instead of the shared Redis."""
    from tests.conftest import wait_until

    port = _free_port()
    broker = {} if "loop_worker" in request.fixturenames else {"CELERY_BROKER_URL": "memory://"}
    # the product's own server command (console.serve: gunicorn + a uvicorn worker; one, to start fast)
    server = start_process([sys.executable, "-m", "console.serve", "--bind", f"127.0.0.1:{port}", "--workers", "1"],
                           name="console", DJANGO_DEBUG="0", DJANGO_ALLOW_ASYNC_UNSAFE="", **broker)
    url = f"http://127.0.0.1:{port}"

    def up():
        if server.popen.poll() is not None:
            raise AssertionError(f"the console exited:\n{server.output()[-3000:]}")
        try:
            return urllib.request.urlopen(url + "/healthz", timeout=2).status == 200
        except OSError:
            return False

    wait_until(up, timeout_s=60)
    return url


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
