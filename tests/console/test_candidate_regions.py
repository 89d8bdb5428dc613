"""A candidate of a target with a two-axis grid is promoted from its regions page: its candidate page sums up
the regions and links there instead of offering a one-axis range dialog, which a one-axis target keeps; the
regions page's promote honours four eyes; the e2e run's calls per route show on the regions page."""

import copy

import pytest
from django.urls import reverse

from loop.models import ServingConfig
from loop.services.decisions import candidate_approve
from tests.console import builders
from tests.loop.test_regions import served_report

pytestmark = pytest.mark.django_db

# what the gate writes for a route set of one box over a two-context grid (gpu_worker/e2e/gate.py)
BOX = {"rows": [1, 5], "n_ctx": [4096, 131073]}
HITS = [{"route": 0, "bounds": BOX, "kernel": "candidate", "calls": 4},
        {"route": None, "bounds": None, "kernel": "default", "calls": 2}]


def _kept(alice, report, target=None):
    thesis = builders.make_thesis(alice, target=target) if target is not None else None
    run = builders.make_run(alice, thesis=thesis)
    candidate = builders.evaluated(run, report, tag="small")
    candidate_approve(candidate=candidate, actor=alice)
    candidate.refresh_from_db()
    assert candidate.status == "kept"
    return candidate


def test_the_candidate_page_of_a_grid_target_sums_up_its_regions_and_links_to_them_without_a_range_dialog(as_dana, alice):
    candidate = _kept(alice, served_report())
    response = as_dana.get(reverse("candidate", args=[candidate.pk]))
    page = response.content.decode()
    summary = response.context["regions"]
    assert summary["won"] == 6 and summary["cells"] == 12 and summary["routes"] == 1 and summary["more_left_out"] == 3
    assert summary["left_out"][0] == "rows 64 x n_ctx 4096: slower on the benchmark: 0.14x"
    assert 'data-testid="region-summary"' in page and "<strong>6 of 12</strong>" in page
    assert f'href="/candidates/{candidate.pk}/regions/#promote" data-testid="promote-regions"' in page
    assert 'data-testid="promote-dialog"' not in page and 'data-testid="open-promote"' not in page


def test_the_range_dialogs_post_does_not_promote_a_grid_targets_candidate(as_dana, alice):
    """A hand-made POST to the one-axis dialog cannot route a two-axis target along one axis."""
    candidate = _kept(alice, served_report())
    body = {"routes": "0 inf candidate", "note": "", "password": "dana-password-1"}
    response = as_dana.post(reverse("candidate_promote", args=[candidate.pk]), body)
    assert response.status_code == 400 and not ServingConfig.objects.exists()
    assert "promote this candidate from its winning-regions page" in response.content.decode()


def test_a_one_axis_target_keeps_the_range_dialog_and_has_no_region_summary(as_dana, alice):
    target = builders.make_target("dsa_indexer_topk_fp8")
    candidate = _kept(alice, served_report(), target=target)
    response = as_dana.get(reverse("candidate", args=[candidate.pk]))
    page = response.content.decode()
    assert response.context["regions"] is None
    assert 'data-testid="promote-dialog"' in page and 'data-testid="region-summary"' not in page
    assert "dsa_indexer_topk_fp8 declares no two-axis grid" in page
    regions = as_dana.get(reverse("candidate_regions", args=[candidate.pk])).content.decode()
    assert 'data-testid="no-grid"' in regions and "promotes it for ranges of one axis" in regions


def test_a_viewer_sees_the_summary_but_no_promote_link(as_charlie, alice):
    candidate = _kept(alice, served_report())
    page = as_charlie.get(reverse("candidate", args=[candidate.pk])).content.decode()
    assert 'data-testid="region-summary"' in page and 'data-testid="promote-regions"' not in page
    assert "is promoted there" not in page


def test_the_regions_pages_promote_refuses_the_runs_starter_under_four_eyes(settings, alice, dana):
    from django.test import Client

    alice.groups.add(*dana.groups.all())  # alice can promote too, and she started the run
    candidate = _kept(alice, served_report())
    client = Client()
    client.force_login(alice)
    url = reverse("candidate_regions_promote", args=[candidate.pk])
    settings.ARK_FOUR_EYES = True
    refused = client.post(url, {"based_on": "0", "password": "alice-password-1"})
    assert refused.status_code == 400 and "four eyes: alice started its run" in refused.content.decode()
    assert not ServingConfig.objects.exists()
    settings.ARK_FOUR_EYES = False  # the setting is what refused it
    assert client.post(url, {"based_on": "0", "password": "alice-password-1"}).status_code == 302
    assert ServingConfig.objects.count() == 1


def test_the_regions_page_shows_the_calls_per_route_of_the_e2e_run(as_dana, alice):
    report = copy.deepcopy(served_report())
    e2e = report["stages"]["e2e"]
    e2e["route_hits"] = HITS
    for point in e2e["points"]:
        inside = point["batch"] <= 4
        point["route_hits"] = [dict(HITS[0], calls=2 if inside else 0), dict(HITS[1], calls=0 if inside else 2)]
    candidate = _kept(alice, report)
    response = as_dana.get(reverse("candidate_regions", args=[candidate.pk]))
    page = response.content.decode()
    assert response.context["e2e_hits"]["routes"] == HITS
    assert 'data-testid="e2e-route-hits"' in page
    assert "<td>0</td>" in page and "<code>rows [1, 5)</code> × <code>n_ctx [4096, 131073)</code>" in page
    assert "batch 1 × context 4096: route 0 (candidate, 2)" in page
    assert "batch 64 × context 131072: fallback (default, 2)" in page


def test_a_report_without_route_counts_shows_no_such_table(as_dana, alice):
    candidate = _kept(alice, served_report())
    response = as_dana.get(reverse("candidate_regions", args=[candidate.pk]))
    assert response.context["e2e_hits"] is None and 'data-testid="e2e-route-hits"' not in response.content.decode()


def test_a_reviewer_measures_the_proposed_boxes_end_to_end_and_the_page_says_what_the_e2e_served(as_bob, alice):
    from loop.models import OutboxMessage

    run = builders.make_run(alice)
    candidate = builders.evaluated(run, served_report(), tag="small")
    assert candidate.status == "awaiting_review"
    page = as_bob.get(reverse("candidate_regions", args=[candidate.pk])).content.decode()
    assert 'data-testid="measure-routes"' in page and "Measure the 1 proposed box end to end" in page
    response = as_bob.post(reverse("candidate_regions_measure", args=[candidate.pk]))
    assert response.status_code == 302 and response["Location"] == reverse("candidate", args=[candidate.pk])
    candidate.refresh_from_db()
    spec = OutboxMessage.objects.filter(task="gpu.evaluate").last().args[0]
    routes = [{"bounds": {"rows": [1, 5], "n_ctx": [4096, 131073]}, "kernel": "candidate"}]
    assert candidate.status == "queued" and spec["candidate_id"] == candidate.pk and spec["e2e_routes"] == routes
    # the worker's report says it served those boxes; the page says the verdict is the route set's
    report = copy.deepcopy(served_report())
    report["stages"]["e2e"].update(routes=routes, route_hits=HITS)
    builders.progress(candidate, "benchmark")
    builders.report(candidate, report)
    page = as_bob.get(reverse("candidate_regions", args=[candidate.pk])).content.decode()
    assert "the e2e gate served the candidate in the boxes below only" in page


def test_a_viewer_cannot_queue_the_route_measurement_and_a_candidate_without_a_region_has_none(as_charlie, as_bob, alice):
    from loop.models import OutboxMessage

    run = builders.make_run(alice)
    candidate = builders.evaluated(run, served_report(), tag="small")
    loser = builders.evaluated(run, served_report(small_ratio=1.5), tag="loser")
    queued = OutboxMessage.objects.filter(task="gpu.evaluate").count()
    page = as_charlie.get(reverse("candidate_regions", args=[candidate.pk])).content.decode()
    assert 'data-testid="measure-routes"' not in page
    assert as_charlie.post(reverse("candidate_regions_measure", args=[candidate.pk])).status_code == 403
    candidate.refresh_from_db()
    assert candidate.status == "awaiting_review"
    response = as_bob.post(reverse("candidate_regions_measure", args=[loser.pk]), follow=True)
    assert "wins no region of its target&#x27;s grid" in response.content.decode()
    assert OutboxMessage.objects.filter(task="gpu.evaluate").count() == queued
