import pytest
from django.urls import reverse

from loop.models import Event, Run, Thesis
from tests.console import builders

pytestmark = pytest.mark.django_db


def thesis_post(target, **overrides):
    data = {"title": "Fuse the merge", "body": "Logits are kept in **four** chunks.", "target": target.name,
            "hardware": "h200", "model": "deepseek-v3.2", "constraints": "", "priority": "5"}
    data.update(overrides)
    return data


@pytest.mark.parametrize("who, allowed", [("owner", True), ("reviewer", True), ("stranger", False)])
def test_creating_a_thesis_needs_the_edit_thesis_permission(people, who, allowed):
    target = builders.make_target()
    response = people[who].post(reverse("thesis_new"), thesis_post(target))
    if allowed:
        thesis = Thesis.objects.get()
        assert response.status_code == 302 and response["Location"] == reverse("thesis", args=[thesis.pk])
        assert Event.objects.filter(type="thesis.created", subject_id=str(thesis.pk)).exists()
    else:
        assert response.status_code == 403
        assert b"needs the reviewer role" in response.content and b"loop.edit_thesis" not in response.content
        assert not Thesis.objects.exists()


def test_a_bad_thesis_form_shows_its_errors_next_to_the_fields(as_alice):
    target = builders.make_target()
    response = as_alice.post(reverse("thesis_new"), thesis_post(target, title="", priority="many"))
    assert response.status_code == 400
    page = response.content.decode()
    assert 'data-testid="error-title"' in page and 'data-testid="error-priority"' in page
    assert not Thesis.objects.exists()


@pytest.mark.parametrize("who, allowed", [("owner", True), ("reviewer", True), ("stranger", False)])
def test_editing_a_thesis(people, alice, who, allowed):
    thesis = builders.make_thesis(alice)
    data = thesis_post(thesis.target, title="Incremental top-k", status="active")
    response = people[who].post(reverse("thesis_edit", args=[thesis.pk]), data)
    thesis.refresh_from_db()
    if allowed:
        assert response.status_code == 302
        assert (thesis.title, thesis.status) == ("Incremental top-k", "active")
        assert Event.objects.get(type="thesis.edited").payload["fields"] == [
            "body", "model", "priority", "status", "title"]
    else:
        assert response.status_code == 403 and thesis.title == "Reduce top-k incrementally"


@pytest.mark.parametrize("who, allowed", [("owner", True), ("reviewer", True), ("stranger", False)])
def test_prioritising_a_thesis(people, alice, who, allowed):
    thesis = builders.make_thesis(alice)
    response = people[who].post(reverse("thesis_prioritise", args=[thesis.pk]), {"priority": "42"})
    thesis.refresh_from_db()
    assert response.status_code == (302 if allowed else 403)
    assert thesis.priority == (42 if allowed else 0)


def test_the_backlog_sorts_and_filters(as_charlie, alice, bob):
    builders.make_thesis(alice, title="Low", priority=1)
    builders.make_thesis(bob, title="High", priority=9, hardware="b200")
    page = as_charlie.get(reverse("theses")).content.decode()
    assert page.index("High") < page.index("Low")
    page = as_charlie.get(reverse("theses"), {"sort": "-priority"}).content.decode()
    assert page.index("Low") < page.index("High")
    page = as_charlie.get(reverse("theses"), {"owner": "alice"}).content.decode()
    assert ">Low<" in page and ">High<" not in page
    page = as_charlie.get(reverse("theses"), {"hardware": "b200"}).content.decode()
    assert ">High<" in page and ">Low<" not in page
    page = as_charlie.get(reverse("theses"), {"sort": "title", "owner": "alice"}).content.decode()
    assert 'href="?owner=alice&amp;sort=-title"' in page and 'href="?owner=alice&amp;sort=priority"' in page


def test_the_markdown_preview_renders_without_raw_html(as_alice):
    response = as_alice.post(reverse("markdown_preview"), {"body": "**bold** <script>alert(1)</script>"})
    page = response.content.decode()
    assert "<strong>bold</strong>" in page and "<script>" not in page and "&lt;script&gt;" in page


def test_the_preview_is_refused_without_csrf(alice):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.post(reverse("markdown_preview"), {"body": "x"}).status_code == 403


def test_a_script_in_a_thesis_is_shown_as_text(as_bob, alice):
    thesis = builders.make_thesis(alice, title="<script>alert('t')</script>",
                                  body="<script>alert('b')</script>\n\n<img src=x onerror=alert(1)>")
    page = as_bob.get(reverse("thesis", args=[thesis.pk])).content.decode()
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(&#x27;t&#x27;)&lt;/script&gt;" in page


@pytest.mark.parametrize("who, allowed", [("owner", True), ("reviewer", True), ("stranger", False)])
def test_starting_a_run_from_a_thesis(people, alice, who, allowed):
    thesis = builders.make_thesis(alice)
    response = people[who].post(reverse("run_start", args=[thesis.pk]), {
        "proposer": "sweep", "proposer_settings": '{"seed_source": "# seed"}', "hardware": "h200", "profile": "smoke",
        "budget_candidates": "5", "budget_gpu_minutes": "10", "review_mode": "gate", "threshold": "0.03",
        "plateau_k": "4", "floor_fraction_stop": "0.9"})
    if allowed:
        run = Run.objects.get()
        assert response.status_code == 302 and response["Location"] == reverse("run", args=[run.pk])
        assert (run.review_mode, run.budget_candidates, run.proposer_settings) == ("gate", 5, {"seed_source": "# seed"})
        assert run.policy["threshold"] == 0.03 and run.policy["plateau_k"] == 4
    else:
        assert response.status_code == 403 and not Run.objects.exists()


def test_a_bad_run_form_shows_its_errors(as_alice, alice):
    thesis = builders.make_thesis(alice)
    response = as_alice.post(reverse("run_start", args=[thesis.pk]), {
        "proposer": "sweep", "proposer_settings": "{not json", "hardware": "h200", "profile": "smoke",
        "budget_candidates": "0", "budget_gpu_minutes": "10", "review_mode": "gate"})
    page = response.content.decode()
    assert response.status_code == 400
    assert 'data-testid="error-proposer_settings"' in page and 'data-testid="error-budget_candidates"' in page
    assert not Run.objects.exists()


def test_a_service_refusal_shows_above_the_run_form(as_alice, alice):
    thesis = builders.make_thesis(alice)
    response = as_alice.post(reverse("run_start", args=[thesis.pk]), {
        "proposer": "llm", "proposer_settings": '{"api_key": "sk-x"}', "hardware": "h200", "profile": "smoke",
        "budget_candidates": "5", "budget_gpu_minutes": "10", "review_mode": "gate"})
    assert response.status_code == 400 and b"API key" in response.content
