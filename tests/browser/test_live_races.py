"""A live page never keeps older state than the news it has heard (console/static/ark/live.js,
docs/operations.md): two races, each made certain here instead of left to timing.

- A live section swapped in by htmx listens again only when it settles (20 ms later by default): a message
  that lands between the swap and the settle reaches neither the old section (gone) nor the new one. The
  window is widened to 3 s here, so the next event lands inside it every time.
- A form's answer (the ping form's table) is rendered when the form is sent. The ping's own event re-reads the
  table while the answer travels; the pong's re-read waits behind that one (htmx queues a section's requests).
  The older answer then replaces the table, and both re-reads are dropped, since the table they were for is
  gone. The answer and the first re-read are held here until the pong's message has arrived.
"""

import time

import pytest
from playwright.sync_api import expect

from loop.models import Ping
from tests.browser.conftest import in_thread, login, wait_live
from tests.console import builders

pytestmark = pytest.mark.browser
SETTLE_MS = 3000

# Before the page's scripts: htmx settles after SETTLE_MS, and each message heard is noted with whether the
# run's live section was still unsettled (htmx marks new content `htmx-added` until it is processed).
WIDE_SETTLE = """
window.arkHeard = [];
document.addEventListener("DOMContentLoaded", function () { window.htmx.config.defaultSettleDelay = SETTLE_MS; });
document.addEventListener("ark-event", function (event) {
  const section = document.getElementById("run-live");
  window.arkHeard.push({ seq: event.detail.seq, unsettled: !!(section && section.classList.contains("htmx-added")) });
});
""".replace("SETTLE_MS", str(SETTLE_MS))


def test_news_that_lands_while_a_section_settles_is_read_again(console_url, page, alice):
    page.add_init_script(WIDE_SETTLE)
    run = in_thread(builders.make_run, alice)
    candidate = in_thread(builders.dispatch, in_thread(builders.submit, run, tag="settling"))
    login(page, console_url, "alice")
    page.goto(f"{console_url}/runs/{run.pk}/")
    wait_live(page)
    stage = page.get_by_test_id(f"candidate-row-{candidate.number}").get_by_test_id("stage")
    expect(stage).to_contain_text("queued")

    in_thread(builders.progress, candidate, "verify")
    expect(stage).to_contain_text("verify:started", timeout=10_000)
    in_thread(builders.progress, candidate, "benchmark")  # lands while the verify swap settles
    expect(stage).to_contain_text("benchmark:started", timeout=SETTLE_MS * 3)

    heard = page.evaluate("window.arkHeard")
    last = max(h.get("seq") or 0 for h in heard)
    assert [h["unsettled"] for h in heard if h.get("seq") == last] == [True], heard  # the race did happen
    assert int(page.evaluate("document.body.dataset.rereads || '0'")) >= 1


def _wait_for(page, condition, what: str, timeout_s: float = 30) -> None:
    """Let Playwright run (its route handlers included) until condition() holds."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout_s}s"
        page.wait_for_timeout(50)


def test_a_pong_that_lands_while_the_ping_form_is_answered_stays_on_the_page(console_url, page, bob):
    from loop.services.wiring import ping_record_pong

    login(page, console_url, "bob")  # lands on the dashboard
    wait_live(page)
    held = {}

    def hold_answer(route):
        held["sent"] = True
        held["answer"] = (route, route.fetch())  # the ping is sent and committed; the form's answer waits here

    def hold_reread(route):
        if "sent" in held and "reread" not in held and route.request.headers.get("hx-target") == "pings":
            held["reread"] = route  # the pings table's re-read for the ping's own event waits here
        else:
            route.continue_()

    page.route("**/ping/", hold_answer)
    page.route(f"{console_url}/", hold_reread)
    page.evaluate("""() => document.body.addEventListener("htmx:afterSettle", (event) => {
        if (event.detail.requestConfig && event.detail.requestConfig.verb === "post")
            window.arkFormAnswer = document.getElementById("pings").innerText;
    })""")
    page.fill("input[name=hardware]", "cpu")
    page.click('[data-testid="ping"]')
    _wait_for(page, lambda: "answer" in held and "reread" in held, "the form's request and the re-read for ping.sent")

    ping = in_thread(Ping.objects.get)
    seq = page.evaluate("document.body.dataset.lastSeq")
    assert in_thread(ping_record_pong, ping_id=ping.pk, worker={"name": "gpu-test", "hardware": "cpu"})
    _wait_for(page, lambda: page.evaluate("document.body.dataset.lastSeq") != seq, "the pong's message")
    route, answer = held["answer"]
    route.fulfill(response=answer)  # the form's answer, older than the pong, replaces the table
    page.wait_for_function("() => window.arkFormAnswer !== undefined")
    assert "waiting" in page.evaluate("window.arkFormAnswer")
    held["reread"].continue_()  # then the re-read answers, for a table that is no longer on the page

    pong = page.locator("#pings .pong")
    expect(pong).to_be_visible(timeout=10_000)
    expect(pong).to_contain_text("gpu-test (cpu)")
