"""Winning regions in the browser: the heatmap and routes of a candidate that wins only at small rows,
the tokens/s waterfall after promote / re-promote / rollback, and two deployers promoting at once."""

import pytest
from playwright.sync_api import expect

from loop.models import ServingConfig
from tests.browser.conftest import in_thread, login, screenshot
from tests.console import builders
from tests.loop.test_regions import served_report

pytestmark = pytest.mark.browser


def _kept(alice, tag, hits=None, **kw):
    from loop.services.decisions import candidate_approve

    report = served_report(**kw)
    if hits is not None:  # what the e2e gate writes when it served a route set (gpu_worker/e2e/gate.py)
        report["stages"]["e2e"]["route_hits"] = hits
    run = builders.make_run(alice)
    candidate = builders.evaluated(run, report, tag=tag)
    candidate_approve(candidate=candidate, actor=alice)
    return candidate


def test_the_heatmap_and_routes_of_a_candidate_that_wins_only_at_small_rows(console_url, page, alice, dana):
    hits = [{"route": 0, "bounds": {"rows": [1, 5], "n_ctx": [4096, 131073]}, "kernel": "candidate", "calls": 8},
            {"route": None, "bounds": None, "kernel": "default", "calls": 4}]
    candidate = in_thread(_kept, alice, "small", hits=hits)
    login(page, console_url, "dana")
    page.goto(f"{console_url}/candidates/{candidate.pk}/")
    expect(page.get_by_test_id("region-summary")).to_contain_text("6 of 12")
    page.get_by_test_id("regions-link").click()
    page.wait_for_selector('[data-testid="region-heatmap"] .main-svg')
    # hovering the 1-row x 4096 cell shows its speedup, interval and who serves it before and after
    box = page.locator('[data-testid="region-heatmap"] .nsewdrag').first.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 6, box["y"] + box["height"] * 7 / 8)  # rows are drawn bottom-up
    hover = page.locator('[data-testid="region-heatmap"] .hoverlayer')
    expect(hover).to_contain_text("rows 1 x n_ctx 4096")
    expect(hover).to_contain_text("1.67x (95% CI")
    expect(hover).to_contain_text(f"served now by default, after: c{candidate.pk}")
    routes = page.get_by_test_id("proposed-routes")
    expect(routes).to_contain_text("rows [1, 5)")
    expect(routes).to_contain_text("n_ctx [4096, 131073)")
    left_out = page.get_by_test_id("left-out")
    expect(left_out).to_contain_text("slower on the benchmark: 0.14x")
    expect(left_out).to_contain_text("slower end to end at batch 64, context 131072")
    expect(page.get_by_test_id("impact")).to_contain_text("weighted by equal weights (no workload profile)")
    served = page.get_by_test_id("e2e-route-hits")
    expect(served).to_contain_text("rows [1, 5)")
    expect(served.locator("tbody tr").nth(1)).to_contain_text("fallback")
    screenshot(page, "regions")


def test_the_waterfall_after_promote_repromote_and_rollback(console_url, page, alice, dana):
    from loop.regions import analyze_candidate_grid
    from loop.services.deployments import deployment_promote

    def first_version():
        small = _kept(alice, "small", e2e_small=(1.04, 1.0))
        deployment_promote(actor=dana, candidate=small, routes=list(analyze_candidate_grid(small).routes))
        return _kept(alice, "big", e2e_small=(1.10, 1.08))

    big = in_thread(first_version)
    login(page, console_url, "dana")
    for version in (2, 3):  # promote, then the same routes again on purpose
        page.goto(f"{console_url}/candidates/{big.pk}/regions/")
        form = page.get_by_test_id("regions-promote-form")
        form.locator("input[name=password]").fill("dana-password-1")
        form.get_by_test_id("regions-promote").click()
        expect(page.get_by_test_id("current-version")).to_have_text(f"v{version}")
    form = page.get_by_test_id("rollback-form")
    form.locator("input[name=to_version]").fill("1")
    form.locator("input[name=password]").fill("dana-password-1")
    form.get_by_test_id("rollback").click()
    expect(page.get_by_test_id("current-version")).to_have_text("v4")
    page.wait_for_selector('[data-testid="waterfall-chart"] .main-svg')
    expect(page.get_by_test_id("step-v1")).to_contain_text("13")   # +40 tokens/s at one of three points
    expect(page.get_by_test_id("step-v2")).to_contain_text("47")   # +60 and +80 more
    expect(page.get_by_test_id("step-v3")).to_contain_text("0")    # identical routes gain nothing
    expect(page.get_by_test_id("step-v4")).to_contain_text("-47")  # the rollback takes it back
    page.get_by_test_id("explain-form").locator("input[name=rows]").fill("3")
    page.get_by_test_id("explain-form").locator("input[name=n_ctx]").fill("50000")
    page.get_by_test_id("explain").click()
    expect(page.get_by_test_id("explained")).to_contain_text("Promoted on: rows 1 × n_ctx 4096")
    screenshot(page, "waterfall")


def test_two_deployers_promoting_at_once_make_one_version(console_url, browser, alice, dana, django_user_model):
    from tests.conftest import _user

    in_thread(_user, django_user_model, "erin", ["reviewer", "deployer"])
    candidate = in_thread(_kept, alice, "small")
    pages = []
    for name in ("dana", "erin"):
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        login(page, console_url, name)
        page.goto(f"{console_url}/candidates/{candidate.pk}/regions/")
        page.get_by_test_id("regions-promote-form").locator("input[name=password]").fill(f"{name}-password-1")
        pages.append(page)
    for page in pages:  # both submit before either answer comes back
        page.get_by_test_id("regions-promote").click(no_wait_after=True)
    for page in pages:
        page.wait_for_selector('[data-testid="current-version"]')
    assert in_thread(ServingConfig.objects.count) == 1
    told = [p for p in pages if "Already done: v1" in p.content()]
    assert len(told) == 1
    screenshot(told[0], "promote-already-done")


def test_a_reviewer_measures_the_proposed_boxes_end_to_end_from_the_regions_page(console_url, page, alice, bob):
    from loop.models import Candidate, OutboxMessage

    def waiting():
        return builders.evaluated(builders.make_run(alice), served_report(), tag="small")

    candidate = in_thread(waiting)
    login(page, console_url, "bob")
    page.goto(f"{console_url}/candidates/{candidate.pk}/regions/")
    expect(page.get_by_test_id("proposed-routes")).to_contain_text("rows [1, 5)")
    page.get_by_test_id("measure-routes").click()
    page.wait_for_url(f"{console_url}/candidates/{candidate.pk}/")
    expect(page.locator("body")).to_contain_text("its e2e gate serving it in its 1 proposed box(es) only")

    def queued():
        spec = OutboxMessage.objects.filter(task="gpu.evaluate").order_by("-pk").first().args[0]
        return Candidate.objects.get(pk=candidate.pk).status, spec["e2e_routes"]

    status, routes = in_thread(queued)
    assert status == "queued"
    assert routes == [{"bounds": {"rows": [1, 5], "n_ctx": [4096, 131073]}, "kernel": "candidate"}]
