"""A live page never keeps older state than the news it has heard (console/static/ark/live.js,
docs/operations.md): two races, each made certain here instead of left to timing.

- A live section swapped in by htmx listens again only when it settles (20 ms later by default): a message
  that lands between the swap and the settle reaches neither the old section (gone) nor the new one. The
  window is widened to 3 s here, so the next event lands inside it every time.
- A form's answer (the ping form's table) is rendered when the form is sent. The ping's own event re-reads the
  table while the answer travels; the pong's re-read waits behind that one (htmx queues a section's requests).
  The older answer then replaces the table, and both re-reads are dropped, since the table they were for is
  gone. The answer and the first re-read are held here until the pong's message has arrived.

Two gaps around those races, closed the same way (a re-read):

- A page is rendered with the newest sequence number it shows (`data-last-seq`); an event published before its
  socket joins reaches no one. The socket's first message names the newest event of its group, and the page
  re-reads when that is newer. The page's script is held here until the event is published.
- A re-read that fails (an error status, no answer) would leave the older state on the page. It is tried again
  with a bounded backoff, and the live dot shows the page as degraded meanwhile. The first re-read fails here.
"""

import re
import time

import pytest
from playwright.sync_api import expect

from loop.models import Event, Ping
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


def test_an_event_published_before_the_socket_joins_is_read(console_url, page, alice):
    run = in_thread(builders.make_run, alice)
    login(page, console_url, "alice")
    held = []

    def hold(route):
        held.append(route)  # the page is served; its socket waits for its script

    page.route(re.compile(r"/ark/live\.js"), hold)
    page.goto(f"{console_url}/runs/{run.pk}/", wait_until="commit")
    _wait_for(page, lambda: held, "the page's request for live.js")
    page.wait_for_function("document.readyState === 'interactive'")  # parsed; deferred scripts wait for live.js
    rendered = int(page.evaluate("document.body.dataset.lastSeq"))

    candidate = in_thread(builders.submit, run, tag="before-join")  # pushed to no socket: none has joined
    row = page.get_by_test_id(f"candidate-row-{candidate.number}")
    assert row.count() == 0  # the page was rendered before it
    assert in_thread(lambda: Event.objects.get(type="candidate.proposed", subject_id=str(candidate.pk)).id) > rendered
    held[0].continue_()
    wait_live(page)
    expect(row).to_be_visible(timeout=10_000)
    assert page.evaluate("document.body.dataset.joinResyncs") == "1"
    assert page.evaluate("document.body.dataset.reconnects") is None


@pytest.mark.parametrize("failure", ["503", "no answer"])
def test_a_failed_re_read_is_tried_again_and_the_page_says_it_is_degraded(console_url, page, alice, failure):
    run = in_thread(builders.make_run, alice)
    login(page, console_url, "alice")
    page.goto(f"{console_url}/runs/{run.pk}/")
    wait_live(page)
    status = page.locator("#live-status")
    expect(status).to_have_attribute("title", "live updates")
    rereads = []

    def answer(route):
        if route.request.headers.get("hx-request") != "true":
            route.continue_()
        elif not rereads:
            rereads.append(route)
            if failure == "503":
                route.fulfill(status=503, body="busy")
            else:
                route.abort("connectionfailed")
        else:
            rereads.append(route)  # the retry waits here while the test looks at the page

    page.route(re.compile(rf"/runs/{run.pk}/(\?.*)?$"), answer)
    candidate = in_thread(builders.submit, run, tag="failing-reread")
    _wait_for(page, lambda: len(rereads) == 2, "the failed re-read and its retry")
    row = page.get_by_test_id(f"candidate-row-{candidate.number}")
    assert row.count() == 0
    assert page.evaluate("document.body.dataset.liveDegraded") == "1"
    why = "HTTP 503" if failure == "503" else "no answer"
    expect(status).to_have_attribute("title", f"live updates: re-reading this page failed ({why}), trying again")
    expect(status).to_have_class(re.compile(r"\bdegraded\b"))

    rereads[1].continue_()
    expect(row).to_be_visible(timeout=10_000)
    expect(status).to_have_attribute("title", "live updates")
    assert page.evaluate("document.body.dataset.liveDegraded") is None
    assert page.evaluate("document.body.dataset.rereadRetries") == "1"
