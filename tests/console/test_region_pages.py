"""The regions page (heatmap, routes, left-out cells, effect against what serves now, promote) and the
deployment page's explain, workload and rollback forms, through the Django test client."""

import pytest
from django.urls import reverse

from loop.models import ServingConfig, WorkloadProfile
from loop.services.decisions import candidate_approve
from tests.console import builders
from tests.loop.test_regions import served_report

pytestmark = pytest.mark.django_db


@pytest.fixture
def small_rows(alice):
    run = builders.make_run(alice)
    candidate = builders.evaluated(run, served_report(), tag="small")
    candidate_approve(candidate=candidate, actor=alice)
    candidate.refresh_from_db()
    assert candidate.status == "kept" and "Kept for the region it wins" in candidate.decisions.first().reason_text
    return candidate


def test_the_regions_page_draws_the_heatmap_routes_and_what_is_left_out(as_dana, small_rows):
    response = as_dana.get(reverse("candidate_regions", args=[small_rows.pk]))
    page = response.content.decode()
    assert response.status_code == 200
    heat = response.context["heatmap"]["data"][0]
    assert heat["type"] == "heatmap" and list(heat["y"]) == ["1", "4", "64", "128"]
    assert "1.67x" in heat["text"][0][0] and "95% CI" in heat["customdata"][0][0]
    assert len(response.context["heatmap"]["layout"]["shapes"]) == 6  # the six cells changing owner, outlined
    assert "rows [1, 5)" in page and "n_ctx [4096, 131073)" in page
    assert "slower on the benchmark: 0.14x" in page and "slower end to end at batch 64, context 131072" in page
    assert "nothing promoted: the default" in page


def test_promoting_from_the_regions_page_asks_for_the_password_and_makes_one_box_version(as_dana, small_rows):
    url = reverse("candidate_regions_promote", args=[small_rows.pk])
    wrong = as_dana.post(url, {"based_on": "0", "password": "nope"})
    assert wrong.status_code == 400 and "That is not your password." in wrong.content.decode()
    assert not ServingConfig.objects.exists()
    done = as_dana.post(url, {"based_on": "0", "password": "dana-password-1", "note": "small rows"})
    assert done.status_code == 302
    config = ServingConfig.objects.get()
    assert config.routes[0]["bounds"] == {"rows": [1, 5], "n_ctx": [4096, 131073]}
    assert config.routes[0]["evidence"]["cells"][0]["speedup"] == pytest.approx(1 / 0.6, rel=1e-3)
    again = as_dana.post(url, {"based_on": "0", "password": "dana-password-1"}, follow=True)
    assert "Already done: v1" in again.content.decode() and ServingConfig.objects.count() == 1


def test_explain_workload_and_waterfall_on_the_deployment_page(as_dana, small_rows):
    as_dana.post(reverse("candidate_regions_promote", args=[small_rows.pk]), {"based_on": "0", "password": "dana-password-1"})
    url = reverse("deployment", args=["dsa_topk", "h200"])
    inside = as_dana.get(url, {"rows": "3", "n_ctx": "50000"}).content.decode()
    assert f"serves it with <strong>c{small_rows.pk}</strong>" in inside and "1.67x" in inside
    outside = as_dana.get(url, {"rows": "5", "n_ctx": "4096"}).content.decode()
    assert "the <strong>default</strong> kernel serves it" in outside
    bad = as_dana.post(reverse("deployment_workload", args=["dsa_topk", "h200"]), {"cells": "rows=1 n_ctx=4096 lots"})
    assert bad.status_code == 400 and "line 1: expected rows=&lt;int&gt; n_ctx=&lt;int&gt; &lt;weight&gt;" in bad.content.decode()
    good = as_dana.post(reverse("deployment_workload", args=["dsa_topk", "h200"]),
                        {"cells": "rows=1 n_ctx=4096 3\nrows=64 n_ctx=131072 1 # most traffic is small"})
    assert good.status_code == 302 and len(WorkloadProfile.objects.get().cells) == 2
    page = as_dana.get(url)
    assert page.context["falls"]["weighted_by"] == "workload profile"
    assert page.context["falls"]["steps"][0]["measured"]


def test_the_deployments_list_ranks_the_backlog_and_marks_unknown_ceilings(as_dana, small_rows):
    page = as_dana.get(reverse("deployments")).content.decode()
    assert 'data-testid="backlog-dsa_topk"' in page
    assert "unknown (no zero-cost e2e run)" in page and "left to gain" in page


def test_the_candidate_page_sends_a_deployer_to_the_regions_page_decided_against_the_version_shown(as_dana, small_rows):
    page = as_dana.get(reverse("candidate", args=[small_rows.pk])).content.decode()
    assert 'data-testid="promote-regions"' in page and 'data-testid="promote-dialog"' not in page
    regions = as_dana.get(reverse("candidate_regions", args=[small_rows.pk])).content.decode()
    assert 'name="based_on" value="0"' in regions and 'id="promote"' in regions


def test_the_explain_gives_the_routes_e2e_calls_only_when_its_boxes_were_served_as_routes(as_dana, alice):
    import copy

    box = {"rows": [1, 5], "n_ctx": [4096, 131073]}
    hits = [{"route": 0, "bounds": box, "kernel": "candidate", "calls": 6},
            {"route": None, "bounds": None, "kernel": "default", "calls": 3}]
    url = reverse("deployment", args=["dsa_topk", "h200"])
    for routes, expected in ((None, "served the candidate at every shape, not in its boxes"),
                             ([{"bounds": box, "kernel": "candidate"}], "this route took <strong>6</strong> top-k calls")):
        report = copy.deepcopy(served_report())
        report["stages"]["e2e"].update(route_hits=hits, routes=routes)
        candidate = builders.evaluated(builders.make_run(alice), report, tag=f"routes {routes is not None}")
        candidate_approve(candidate=candidate, actor=alice)
        version = ServingConfig.objects.count()
        response = as_dana.post(reverse("candidate_regions_promote", args=[candidate.pk]),
                                {"based_on": str(version), "password": "dana-password-1"})
        assert response.status_code == 302
        page = as_dana.get(url, {"rows": "3", "n_ctx": "50000"}).content.decode()
        assert f"serves it with <strong>c{candidate.pk}</strong>" in page
        evaluation = candidate.evaluations.get()
        assert expected in page and f"evaluation {evaluation.pk}" in page, page[page.find("route-e2e-calls"):][:400]
