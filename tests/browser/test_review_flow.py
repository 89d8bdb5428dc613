"""A reviewer watches a run live, approves a candidate and finds the decision in the audit log; a viewer
cannot; a deployer promotes a candidate's winning regions and downloads the new serving config."""

import json
from pathlib import Path

import pytest
from playwright.sync_api import expect

from loop.models import Candidate, ServingConfig
from tests.browser.conftest import in_thread, login, screenshot, wait_live
from tests.console import builders

pytestmark = pytest.mark.browser
LIVE_S = 10_000  # ms to wait for a pushed change; it comes in well under a second, this only bounds a failure


def _history(alice):
    """A gated run with a GPU worker: a kept seed, a candidate the guard caught and a slower one."""
    import time

    from loop.services.decisions import candidate_approve
    from loop.services.wiring import worker_heartbeat_record

    worker_heartbeat_record(beat={"name": "gpu-h200-0", "hardware": "h200", "sent_at": time.time(),
                                  "fingerprint": {"kind": "h200", "gpu": "NVIDIA H200", "driver": "570.124"}})
    run = builders.make_run(alice)
    seed = builders.evaluated(run, builders.passing_report(speedup=1.15, crossover_at=None), tag="seed")
    candidate_approve(candidate=seed, actor=alice, note="seed")
    builders.evaluated(run, builders.guard_report(), tag="guarded", parent=seed)
    builders.evaluated(run, builders.passing_report(speedup=0.9), tag="slower", parent=seed)
    return run, seed


def test_a_reviewer_sees_a_candidate_appear_and_change_stage_live_then_approves_it(console_url, page, alice, bob):
    run, seed = in_thread(_history, alice)
    login(page, console_url, "bob")
    page.goto(f"{console_url}/runs/{run.pk}/")
    wait_live(page)
    expect(page.get_by_test_id("candidate-row-2")).to_contain_text("guard:side_stream")

    candidate = in_thread(builders.submit, run, tag="live", parent=seed)
    row = page.get_by_test_id(f"candidate-row-{candidate.number}")
    expect(row).to_be_visible(timeout=LIVE_S)
    expect(row.get_by_test_id("stage")).to_contain_text("proposed")

    candidate = in_thread(builders.dispatch, candidate)
    expect(row.get_by_test_id("stage")).to_contain_text("queued", timeout=LIVE_S)
    in_thread(builders.progress, candidate, "verify")
    expect(row.get_by_test_id("stage")).to_contain_text("verify:started", timeout=LIVE_S)
    in_thread(builders.progress, candidate, "benchmark")
    expect(row.get_by_test_id("stage")).to_contain_text("benchmark:started", timeout=LIVE_S)
    in_thread(builders.report, candidate, builders.passing_report(speedup=1.3))
    expect(row.get_by_test_id("stage")).to_contain_text("awaiting review", timeout=LIVE_S)
    page.wait_for_selector('[data-testid="best-chart"] .main-svg')
    screenshot(page, "run")

    page.goto(f"{console_url}/candidates/{candidate.pk}/")
    expect(page.get_by_test_id("parent-diff")).to_contain_text("variant live")
    expect(page.get_by_test_id("incumbent-diff")).to_contain_text("variant seed")
    page.wait_for_selector('[data-testid="shape-chart"] .main-svg')
    screenshot(page, "candidate")

    page.goto(f"{console_url}/runs/{run.pk}/")
    page.get_by_test_id(f"approve-{candidate.number}").click()
    expect(page.get_by_test_id(f"candidate-row-{candidate.number}")).to_have_attribute("data-status", "kept")
    assert in_thread(lambda: Candidate.objects.get(pk=candidate.pk).status) == "kept"

    page.goto(f"{console_url}/audit/?actor=bob")
    events = page.get_by_test_id("events")
    expect(events).to_contain_text("candidate.approved")
    expect(events).to_contain_text(f"candidate {candidate.pk}")

    page.goto(f"{console_url}/")
    wait_live(page)
    expect(page.get_by_test_id("decision-feed")).to_contain_text("Approved by bob")
    expect(page.get_by_test_id("workers")).to_contain_text("NVIDIA H200")
    screenshot(page, "dashboard")


def test_a_viewer_has_no_approve_button_and_a_forged_post_is_refused(console_url, page, alice, charlie):
    run = in_thread(builders.make_run, alice)
    candidate = in_thread(builders.evaluated, run, builders.passing_report())
    login(page, console_url, "charlie")
    page.goto(f"{console_url}/runs/{run.pk}/")
    row = page.get_by_test_id(f"candidate-row-{candidate.number}")
    expect(row.get_by_test_id("stage")).to_contain_text("awaiting review")
    expect(page.locator("[data-testid^=approve-]")).to_have_count(0)
    expect(page.get_by_test_id("pause")).to_have_count(0)

    forged = page.evaluate("""async (url) => {
        const token = document.cookie.split('; ').find(c => c.startsWith('csrftoken=')).split('=')[1];
        const withToken = await fetch(url, {method: 'POST', headers: {'X-CSRFToken': token}});
        const without = await fetch(url, {method: 'POST'});
        return {withToken: withToken.status, text: await withToken.text(), without: without.status};
    }""", f"{console_url}/candidates/{candidate.pk}/approve/")
    assert forged["withToken"] == 403 and "needs the reviewer role" in forged["text"]
    assert forged["without"] == 403
    assert in_thread(lambda: Candidate.objects.get(pk=candidate.pk).status) == "awaiting_review"


def test_a_deployer_promotes_a_candidates_winning_regions_and_downloads_the_new_config(console_url, page, alice, dana):
    from loop.regions import analyze_candidate_grid
    from loop.services.decisions import candidate_approve
    from loop.services.deployments import deployment_promote

    def kept_and_one_earlier_promotion():
        run = builders.make_run(alice)
        earlier = builders.evaluated(run, builders.passing_report(speedup=1.1, crossover_at=None), tag="earlier")
        candidate_approve(candidate=earlier, actor=alice)
        deployment_promote(actor=dana, candidate=earlier, routes=[{"lo": 0, "hi": None, "kernel": "candidate"}])
        candidate = builders.evaluated(run, builders.passing_report(crossover_at=131072), tag="later")
        candidate_approve(candidate=candidate, actor=alice)
        return candidate, list(analyze_candidate_grid(candidate, baseline="default").routes)

    candidate, routes = in_thread(kept_and_one_earlier_promotion)
    assert len(routes) == 1  # it wins below 131072 at the one row count measured
    login(page, console_url, "dana")
    page.goto(f"{console_url}/candidates/{candidate.pk}/")
    expect(page.get_by_test_id("region-summary")).to_contain_text("its routes: 1 box")
    expect(page.get_by_test_id("open-promote")).to_have_count(0)  # no one-axis range dialog for rows x n_ctx
    page.get_by_test_id("promote-regions").click()
    form = page.get_by_test_id("regions-promote-form")
    expect(page.get_by_test_id("proposed-routes")).to_contain_text("rows [64, 65)")

    form.locator("input[name=password]").fill("not-my-password")
    form.get_by_test_id("regions-promote").click()
    expect(page.get_by_test_id("error-password")).to_be_visible()
    assert in_thread(ServingConfig.objects.count) == 1

    form = page.get_by_test_id("regions-promote-form")
    form.locator("input[name=password]").fill("dana-password-1")
    form.get_by_test_id("regions-promote").click()
    expect(page.get_by_test_id("current-version")).to_have_text("v2")
    expect(page.get_by_test_id("current-json")).to_contain_text('"rows": [')
    expect(page.get_by_test_id("version-diff")).to_contain_text(f'"candidate_id": "c{candidate.pk}"')
    page.wait_for_selector('[data-testid="waterfall-chart"] .main-svg')
    screenshot(page, "deployments")

    with page.expect_download() as info:
        page.get_by_test_id("download-current").click()
    document = json.loads(Path(info.value.path()).read_text())
    assert document["version"] == 2 and document["axes"] == ["rows", "n_ctx"]
    served = [r for r in document["routes"] if r["kernel"]["candidate_id"] == f"c{candidate.pk}"]
    assert [r["bounds"] for r in served] == [routes[0]["bounds"]]
    assert served[0]["kernel"]["source"].startswith("import triton")
    assert document == in_thread(lambda: ServingConfig.objects.get(version=2).document)
