"""Every page as owner, reviewer and stranger (a viewer with no role), and anonymous."""

import pytest
from django.urls import reverse

from loop.models import Run, ServingConfig
from tests.console import builders

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(alice, dana):
    run = builders.make_run(alice)
    kept_parent = builders.evaluated(run, builders.passing_report(), tag="p")
    from loop.services.decisions import candidate_approve

    candidate_approve(candidate=kept_parent, actor=alice)
    child = builders.evaluated(run, builders.passing_report(speedup=1.4), tag="c", parent=kept_parent)
    from loop.services.deployments import deployment_promote
    from loop.services.skills import skill_edit

    kept_parent.refresh_from_db()
    config = deployment_promote(actor=dana, candidate=kept_parent,
                                routes=[{"lo": 0, "hi": 100000, "kernel": "candidate"}])
    skill_edit(actor=alice, key="hardware/h200/tma.md", text=SKILL)
    skill_edit(actor=alice, key="hardware/h200/tma.md", text=SKILL + "\nMore.\n")
    return {"run": run, "thesis": run.thesis, "candidate": child, "config": config}


SKILL = ("---\ntitle: TMA on sm_90\nkind: hardware\napplies_to: {hardware: [h200], models: [any], targets: [any]}\n"
         "sources: [\"Hopper tuning guide\"]\n---\nUse TMA for bulk copies.\n")


def page_urls(world) -> list[str]:
    config = world["config"]
    return [
        reverse("dashboard"), reverse("theses"), reverse("thesis_new"), reverse("thesis", args=[world["thesis"].pk]),
        reverse("thesis_edit", args=[world["thesis"].pk]), reverse("skills"), reverse("skill_new"),
        reverse("skill", args=["hardware/h200/tma.md"]), reverse("skill_edit", args=["hardware/h200/tma.md"]),
        reverse("skill_history", args=["hardware/h200/tma.md"]), reverse("skill_download"),
        reverse("run", args=[world["run"].pk]), reverse("candidate", args=[world["candidate"].pk]),
        reverse("deployments"), reverse("deployment", args=[config.target.name, config.hardware]),
        reverse("deployment_download", args=[config.target.name, config.hardware, config.version]),
        reverse("audit"), reverse("audit_csv"),
    ]


@pytest.mark.parametrize("who", ["owner", "reviewer", "stranger"])
def test_every_page_renders_for_every_role(world, people, who):
    for url in page_urls(world):
        response = people[who].get(url)
        assert response.status_code == 200, (who, url, response.status_code)


def test_anonymous_users_are_sent_to_the_login_page_from_every_page(world, client):
    for url in page_urls(world):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith(reverse("login")), url


def test_the_login_page_is_public(client):
    assert client.get(reverse("login")).status_code == 200


@pytest.mark.parametrize("url", ["/theses/999999/", "/runs/999999/", "/candidates/999999/", "/skills/view/no/such.md",
                                 "/skills/history/no/such.md", "/deployments/no_target/h200/",
                                 "/deployments/dsa_topk/h200/v99.json", "/nothing-here/"])
def test_a_missing_object_is_a_404_page_not_a_traceback(as_alice, alice, url):
    builders.make_target()
    response = as_alice.get(url)
    assert response.status_code == 404
    assert b"Not found" in response.content and b"Traceback" not in response.content


def test_a_viewer_sees_no_action_buttons(world, as_charlie):
    run_page = as_charlie.get(reverse("run", args=[world["run"].pk])).content.decode()
    assert "approve-" not in run_page and 'data-testid="pause"' not in run_page
    candidate_page = as_charlie.get(reverse("candidate", args=[world["candidate"].pk])).content.decode()
    assert 'data-testid="approve"' not in candidate_page and 'data-testid="veto"' not in candidate_page
    assert "New thesis" not in as_charlie.get(reverse("theses")).content.decode()


def test_a_reviewer_sees_review_buttons_on_a_candidate_awaiting_review(world, as_bob):
    assert world["candidate"].status == "awaiting_review"
    run_page = as_bob.get(reverse("run", args=[world["run"].pk])).content.decode()
    assert f'data-testid="approve-{world["candidate"].number}"' in run_page
    assert 'data-testid="pause"' in run_page


def test_only_a_deployer_sees_the_promote_link_on_a_kept_candidate(world, as_alice, as_dana):
    kept = world["run"].candidates.get(number=1)
    assert 'data-testid="promote-regions"' not in as_alice.get(reverse("candidate", args=[kept.pk])).content.decode()
    assert 'data-testid="promote-regions"' in as_dana.get(reverse("candidate", args=[kept.pk])).content.decode()


def test_the_run_page_answers_htmx_with_only_its_live_section(world, as_bob):
    response = as_bob.get(reverse("run", args=[world["run"].pk]), HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="run-live"') and "<nav" not in body


def test_serving_config_exists(world):
    assert ServingConfig.objects.count() == 1 and Run.objects.count() == 1
