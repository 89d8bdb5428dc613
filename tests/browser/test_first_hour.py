"""The first hour in a browser: the recorded demo walked from thesis to audit, an idle live page that stays
connected, a skill save that conflicts, the error pages, and plotly's bundle arriving compressed."""

import re
import time

import pytest
from playwright.sync_api import expect

from loop.models import Candidate, ServingConfig
from tests.browser.conftest import IDLE_HOLD_S, in_thread, login, wait_live

pytestmark = pytest.mark.browser
KEY = "hardware/h200/tma.md"


def _skill(body: str) -> str:
    return ("---\ntitle: TMA\nkind: hardware\napplies_to: {hardware: [h200], models: [any], targets: [any]}\n"
            f"sources: [\"guide\"]\n---\n{body}")


def _demo(django_user_model):
    from loop.services.demo import demo_load
    from loop.services.targets import target_sync

    root = django_user_model.objects.create_superuser("root", password="root-password-1")
    target_sync()
    run = demo_load(actor=root)["gate_run"]
    return run, list(run.candidates.order_by("number"))


def test_the_demo_walk_from_thesis_to_audit(console_url, page, django_user_model):
    run, (seed, best) = in_thread(_demo, django_user_model)
    login(page, console_url, "root")
    page.goto(f"{console_url}/theses/{run.thesis_id}/")
    expect(page.get_by_test_id(f"recorded-{run.pk}")).to_have_text("recorded on NVIDIA H200, 2026-12-04")
    page.click(f"a[href='/runs/{run.pk}/']")
    expect(page.get_by_test_id("run-notice")).to_contain_text("recorded on NVIDIA H200, 2026-12-04")
    expect(page.get_by_test_id(f"candidate-row-{best.number}").get_by_test_id("stage")).to_contain_text("awaiting review")

    page.goto(f"{console_url}/candidates/{best.pk}/")
    expect(page.get_by_test_id("recorded")).to_contain_text("recorded on NVIDIA H200, 2026-12-04")
    expect(page.get_by_test_id("parent-diff")).to_be_visible()
    page.get_by_test_id("approve").click()
    assert in_thread(lambda: Candidate.objects.get(pk=best.pk).status) == "kept"

    page.goto(f"{console_url}/candidates/{seed.pk}/")
    page.get_by_test_id("veto-form").locator("textarea, input[name=reason]").first.fill("the best supersedes it")
    page.get_by_test_id("veto").click()
    page.get_by_test_id("confirm-veto").click()
    assert in_thread(lambda: Candidate.objects.get(pk=seed.pk).status) == "vetoed"

    for version in ("v1", "v2"):  # dsa_topk has two axes: promoted from its winning-regions page; twice on purpose
        page.goto(f"{console_url}/candidates/{best.pk}/")
        page.get_by_test_id("regions-link").click()
        form = page.get_by_test_id("regions-promote-form")
        form.locator("input[name=password]").fill("root-password-1")
        form.get_by_test_id("regions-promote").click()
        expect(page.get_by_test_id("current-version")).to_have_text(version)

    form = page.get_by_test_id("rollback-form")
    form.locator("input[name=to_version]").fill("1")
    form.locator("input[name=password]").fill("root-password-1")
    page.get_by_test_id("rollback").click()
    expect(page.get_by_test_id("current-version")).to_have_text("v3")
    rollback = in_thread(ServingConfig.objects.get, version=3)
    assert rollback.rolled_back_to == 1
    assert rollback.routes == in_thread(ServingConfig.objects.get, version=1).routes

    page.goto(f"{console_url}/audit/?actor=root")
    events = page.get_by_test_id("events")
    for event in ("candidate.approved", "candidate.vetoed", "serving.promoted", "serving.rolled_back"):
        expect(events).to_contain_text(event)


def test_an_idle_page_keeps_its_socket(idle_page, transactional_db):
    """channels_redis's 5 s wait against redis-py 8's 5 s read timeout dropped an idle socket at about 6 s
    (docs/operations.md). A page opened when the session started (conftest.idle_page: its own browser context,
    console and run, so no message reaches it) is still on its first connection two minutes later, and still
    live. This test runs last; if the session was shorter than two minutes it waits out the rest."""
    assert idle_page is not None, "conftest.idle_page opens the page only for a session that collects this test"
    assert idle_page.error is None, idle_page.error
    page = idle_page.page
    rest = IDLE_HOLD_S - (time.monotonic() - idle_page.opened)
    if rest > 0:
        time.sleep(rest)
    assert time.monotonic() - idle_page.opened >= IDLE_HOLD_S
    assert page.evaluate("document.body.dataset.wsOpen") == "1"
    assert page.evaluate("document.body.dataset.reconnects") is None
    assert page.evaluate("document.body.dataset.lastSeq") == idle_page.last_seq  # no message: it was idle

    other = page.context.new_page()  # the same person pauses the run from another tab
    other.goto(idle_page.run_url)
    other.get_by_test_id("pause").click()
    expect(other.get_by_test_id("run-status")).to_have_text("paused")
    other.close()
    expect(page.get_by_test_id("run-status")).to_have_text("paused", timeout=10_000)
    assert int(page.evaluate("document.body.dataset.lastSeq")) > int(idle_page.last_seq)
    assert page.evaluate("document.body.dataset.reconnects") is None
    assert "Timeout reading" not in idle_page.server.output()


def _web_workers(console_url: str) -> list[int]:
    """The pids of the console's gunicorn workers under test: children of the master, same command line."""
    from pathlib import Path

    bind = console_url.removeprefix("http://").encode()

    def cmdline(pid) -> bytes:
        try:
            return Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return b""

    def parent(pid) -> int:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])

    pids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and bind in cmdline(p.name)]
    return [pid for pid in pids if bind in cmdline(parent(pid))]


def test_a_reconnect_is_shown_and_resyncs_only_when_it_happens(console_url, page, alice):
    """A web worker dies (gunicorn starts another): the page reconnects, says so, and re-reads what it missed."""
    import os
    import signal

    from tests.conftest import wait_until
    from tests.console import builders

    run = in_thread(builders.make_run, alice)
    login(page, console_url, "alice")
    page.goto(f"{console_url}/runs/{run.pk}/")
    wait_live(page)
    assert page.evaluate("document.body.dataset.reconnects") is None
    expect(page.locator("#live-status")).to_have_attribute("title", "live updates")
    (worker,) = _web_workers(console_url)
    os.kill(worker, signal.SIGKILL)
    candidate = in_thread(builders.submit, run, tag="while-away")  # its event reaches no socket
    wait_until(lambda: page.evaluate("document.body.dataset.reconnects") == "1", timeout_s=30)
    expect(page.locator("#live-status")).to_have_attribute("title", re.compile("reconnected at"))
    expect(page.get_by_test_id(f"candidate-row-{candidate.number}")).to_be_visible(timeout=10_000)


def test_a_conflicting_skill_save_shows_both_versions(console_url, page, alice, bob):
    from loop.services.skills import skill_edit

    in_thread(skill_edit, actor=alice, key=KEY, text=_skill("First.\n"))
    login(page, console_url, "alice")
    page.goto(f"{console_url}/skills/edit/{KEY}")
    expect(page.get_by_test_id("skill-preview")).to_contain_text("First.")
    in_thread(skill_edit, actor=bob, key=KEY, text=_skill("Bob's line.\n"))  # someone saves meanwhile
    page.fill("#id_text", _skill("Alice's line.\n"))
    page.get_by_test_id("save-skill").click()
    expect(page.get_by_test_id("skill-conflict")).to_contain_text("revision 2 was saved since by bob")
    expect(page.get_by_test_id("conflict-theirs")).to_contain_text("Bob's line.")
    expect(page.locator("#id_text")).to_have_value(_skill("Alice's line.\n"))
    page.fill("#id_text", _skill("Bob's line.\nAlice's line.\n"))
    page.get_by_test_id("save-skill").click()
    expect(page.get_by_test_id("skill-body")).to_contain_text("Alice's line.")


def test_error_pages_say_what_happened_in_the_consoles_look(console_url, page, alice, charlie):
    login(page, console_url, "charlie")
    for path, status, words in (("/no/such/page/", 404, "There is no page at /no/such/page/"),
                                ("/skills/export/", 405, "takes POST requests, not GET"),
                                ("/users/", 403, "Only an admin manages people and roles")):
        response = page.goto(f"{console_url}{path}")
        assert response.status == status
        expect(page.get_by_test_id("error-page")).to_contain_text(words)
        expect(page.get_by_test_id("whoami")).to_be_visible()  # the console's own frame, not a bare page
        assert "Traceback" not in page.content() and "loop." not in page.content()


@pytest.fixture
def collected_static(tmp_path, monkeypatch):
    """The static tree as scripts/run collects it (gzip copies beside each file), for the server under test."""
    import subprocess
    import sys

    root = tmp_path / "static"
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"], check=True,
                   env={**__import__("os").environ, "ARK_STATIC_ROOT": str(root)})
    monkeypatch.setenv("ARK_STATIC_ROOT", str(root))
    monkeypatch.setenv("ARK_STATIC_FINDERS", "0")
    return root


def test_the_browser_receives_plotly_compressed(collected_static, console_url, page, alice):
    from tests.console import builders

    run = in_thread(builders.make_run, alice)
    login(page, console_url, "alice")
    with page.expect_response(lambda r: r.url.endswith("/static/plotly/plotly.min.js")) as info:
        page.goto(f"{console_url}/runs/{run.pk}/")  # a page with charts loads plotly's bundle
    response = info.value
    assert response.status == 200 and response.header_value("content-encoding") in ("gzip", "br")
    assert int(response.header_value("content-length")) < 2_000_000  # 4.7 MB uncompressed
