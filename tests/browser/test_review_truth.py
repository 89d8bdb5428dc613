"""Issue 22 in a real browser: a candidate left stale by another's approval says what it was measured against
and asks before approval; a person submits from the browser and follows the candidate to its verdict on a
real GPU worker (CPU mode) and loop worker; a run whose hardware has no live worker says so."""

import time

import pytest
from playwright.sync_api import expect

from loop.models import Candidate, Event, Run, Target, Thesis
from tests.browser.conftest import in_thread, login, screenshot, wait_live
from tests.console import builders

pytestmark = pytest.mark.browser
VERDICT_S = 180_000  # ms: a CPU-mode evaluation in Triton's interpreter (two smallest shapes) ends well inside


def _two_waiting(alice):
    worker_beat("h200")
    run = builders.make_run(alice)
    first = builders.evaluated(run, builders.passing_report(speedup=1.2), tag="first")
    second = builders.evaluated(run, builders.passing_report(speedup=1.3), tag="second")
    return run, first, second


def worker_beat(hardware: str) -> None:
    from loop.services.wiring import worker_heartbeat_record

    worker_heartbeat_record(beat={"name": f"gpu-{hardware}-0", "hardware": hardware, "sent_at": time.time(),
                                  "fingerprint": {"kind": hardware, "gpu": "NVIDIA H200"}})


def test_after_an_approval_the_other_candidate_is_stale_and_asks_before_approval(console_url, page, alice, bob):
    run, first, second = in_thread(_two_waiting, alice)
    login(page, console_url, "bob")
    page.goto(f"{console_url}/runs/{run.pk}/")
    expect(page.get_by_test_id(f"stale-{second.number}")).to_have_count(0)

    page.get_by_test_id(f"approve-{first.number}").click()
    expect(page.get_by_test_id(f"candidate-row-{first.number}")).to_have_attribute("data-status", "kept")
    stale = page.get_by_test_id(f"stale-{second.number}")
    expect(stale).to_have_text(f"measured against the default kernel, superseded by #{first.number}")
    screenshot(page, "stale-candidate")

    page.get_by_test_id(f"approve-{second.number}").click()
    expect(page.get_by_test_id("confirm-what")).to_contain_text(f"superseded by #{first.number}")
    assert in_thread(lambda: Candidate.objects.get(pk=second.pk).status) == "awaiting_review"
    page.get_by_test_id("confirm-approve").click()
    expect(page.get_by_test_id(f"candidate-row-{second.number}")).to_have_attribute("data-status", "kept")
    confirmed = in_thread(lambda: Event.objects.filter(type="candidate.approved").last().payload["confirmed"])
    assert confirmed["stale"]["incumbent_now"] == first.number


def _seed_text() -> str:
    from loop.services.targets import target_seed_source

    return target_seed_source(Target.objects.get(name="add_rmsnorm"))


def _human_run(alice, hardware):
    from loop.services.runs import run_start
    from loop.services.targets import target_sync

    target_sync()
    thesis = Thesis.objects.create(title="Fused add + RMSNorm", body="One pass over the data.", owner=alice,
                                   target=Target.objects.get(name="add_rmsnorm"), hardware=hardware)
    return run_start(actor=alice, thesis=thesis, proposer=Run.Proposer.HUMAN, budget_candidates=3,
                     policy={"plateau_k": 4})


def test_a_person_submits_from_the_browser_and_follows_it_to_its_verdict(
        console_url, page, alice, bob, loop_worker, gpu_worker, gpu_hardware):
    run = in_thread(_human_run, alice, gpu_hardware)
    login(page, console_url, "bob")
    page.goto(f"{console_url}/runs/{run.pk}/")
    page.get_by_test_id("open-submit").click()
    editor = page.get_by_test_id("editor")
    expect(editor).to_contain_text("def forward")  # the target's seed, highlighted in the editor
    expect(editor.locator(".cm-keyword").first).to_be_visible()

    seed = in_thread(_seed_text)
    page.locator("input[name=upload]").set_input_files(
        files=[{"name": "mine.py", "mimeType": "text/x-python", "buffer": (seed + "# uploaded\n").encode()}])
    expect(editor).to_contain_text("# uploaded")  # the file is read into the editor, then edited there
    editor.locator(".CodeMirror-code").click()
    page.keyboard.press("Control+End")
    page.keyboard.type("\n# tried from the browser\n")
    page.get_by_test_id("check").click()
    expect(page.get_by_test_id("check-ok")).to_be_visible()
    expect(page.get_by_test_id("editor")).to_contain_text("# tried from the browser")
    assert in_thread(lambda: run.candidates.count()) == 0  # a check queues nothing
    screenshot(page, "submit")

    page.get_by_test_id("submit").click()
    status = page.get_by_test_id("candidate-status")
    expect(status).to_be_visible()
    wait_live(page)
    expect(status).to_have_text("reverted", timeout=VERDICT_S)  # CPU mode: verified, never kept untimed
    candidate = in_thread(lambda: run.candidates.get())
    assert candidate.author.username == "bob" and "# tried from the browser" in candidate.source
    assert "# uploaded" in candidate.source
    assert candidate.reason_code == "unmeasured" and candidate.evaluations.count() == 1
    expect(page.get_by_test_id("decisions")).to_contain_text("Verified correct")


def test_a_run_with_no_live_worker_says_what_it_waits_for(console_url, page, alice, bob):
    run = in_thread(builders.make_run, alice, hardware="h200")
    login(page, console_url, "bob")
    page.goto(f"{console_url}/runs/{run.pk}/")
    expect(page.get_by_test_id("run-waiting")).to_contain_text(
        "waiting for an h200 worker; none has ever sent a heartbeat")
    screenshot(page, "run-waiting")
    page.goto(f"{console_url}/")
    expect(page.get_by_test_id(f"run-waiting-{run.pk}")).to_contain_text("waiting for an h200 worker")

    in_thread(worker_beat, "b200")
    page.goto(f"{console_url}/theses/new/")
    expect(page.locator("input[name=hardware]")).to_have_value("b200")
