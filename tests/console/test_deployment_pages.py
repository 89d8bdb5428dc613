import json

import pytest
from django.urls import reverse

from loop.models import ServingConfig
from loop.services.decisions import candidate_approve
from loop.services.deployments import deployment_promote
from tests.console import builders

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_versions(alice, dana):
    run = builders.make_run(alice)
    first = builders.evaluated(run, builders.passing_report(), tag="one")
    candidate_approve(candidate=first, actor=alice)
    deployment_promote(actor=dana, candidate=first, routes=[{"lo": 0, "hi": 100000, "kernel": "candidate"}])
    second = builders.evaluated(run, builders.passing_report(speedup=1.5), tag="two")
    candidate_approve(candidate=second, actor=alice)
    deployment_promote(actor=dana, candidate=second, routes=[{"lo": 0, "hi": 50000, "kernel": "candidate"}])
    return run.thesis.target, "h200"


def test_the_detail_shows_the_config_in_force_the_diff_and_the_waterfall(as_charlie, two_versions):
    target, hardware = two_versions
    response = as_charlie.get(reverse("deployment", args=[target.name, hardware]))
    page = response.content.decode()
    assert 'data-testid="current-version">v2<' in page and 'data-testid="version-diff"' in page
    waterfall = response.context["waterfall"]
    assert waterfall["data"][0]["type"] == "waterfall" and len(waterfall["data"][0]["x"]) == 3


def test_download_is_the_exact_json_document(as_charlie, two_versions):
    target, hardware = two_versions
    response = as_charlie.get(reverse("deployment_download", args=[target.name, hardware, 1]))
    assert response["Content-Disposition"].endswith('v1.json"')
    assert json.loads(response.content) == ServingConfig.objects.get(version=1).document


@pytest.mark.parametrize("who, allowed", [("owner", False), ("reviewer", False), ("stranger", False),
                                          ("deployer", True)])
def test_only_a_deployer_rolls_back(people, as_dana, two_versions, who, allowed):
    target, hardware = two_versions
    client = as_dana if who == "deployer" else people[who]
    name = {"owner": "alice", "reviewer": "bob", "stranger": "charlie", "deployer": "dana"}[who]
    response = client.post(reverse("deployment_rollback", args=[target.name, hardware]),
                           {"to_version": "1", "password": f"{name}-password-1"})
    assert response.status_code == (302 if allowed else 403)
    latest = ServingConfig.objects.order_by("-version").first()
    if allowed:
        assert latest.version == 3 and latest.rolled_back_to == 1
        assert latest.routes == ServingConfig.objects.get(version=1).routes
    else:
        assert latest.version == 2


def test_a_rollback_to_the_current_version_is_refused_on_the_form(as_dana, two_versions):
    target, hardware = two_versions
    response = as_dana.post(reverse("deployment_rollback", args=[target.name, hardware]),
                            {"to_version": "2", "password": "dana-password-1"})
    assert response.status_code == 400 and b"already the current one" in response.content


def test_the_overview_lists_the_version_in_force(as_charlie, two_versions):
    page = as_charlie.get(reverse("deployments")).content.decode()
    assert "v2" in page and "v1<" not in page
