import pytest
from django.test import Client
from django.urls import reverse

from loop.models import Candidate, Decision, Event, Run, Worker
from tests.console import builders

pytestmark = pytest.mark.django_db


@pytest.fixture
def awaiting(alice):
    run = builders.make_run(alice)
    return builders.evaluated(run, builders.passing_report())


@pytest.mark.parametrize("who, allowed", [("owner", True), ("reviewer", True), ("stranger", False)])
def test_approving_a_candidate(people, awaiting, who, allowed):
    response = people[who].post(reverse("candidate_approve", args=[awaiting.pk]), {"note": "looks right", "next": "run"})
    awaiting.refresh_from_db()
    if allowed:
        assert response.status_code == 302 and response["Location"] == reverse("run", args=[awaiting.run_id])
        assert awaiting.status == "kept" and awaiting.run.incumbent_id == awaiting.pk
        assert Decision.objects.filter(candidate=awaiting, verdict="approve").exists()
    else:
        assert response.status_code == 403
        assert b"approve or veto candidates; that needs the reviewer role" in response.content
        assert awaiting.status == "awaiting_review"
        assert not Event.objects.filter(type="candidate.approved").exists()


@pytest.mark.parametrize("who, allowed", [("owner", True), ("reviewer", True), ("stranger", False)])
def test_vetoing_a_candidate(people, awaiting, who, allowed):
    """A veto asks for confirmation first (the server answers with the confirmation page, nothing changes),
    then the confirmed POST vetoes."""
    url = reverse("candidate_veto", args=[awaiting.pk])
    asked = people[who].post(url, {"reason": "reads past the row end"})
    awaiting.refresh_from_db()
    assert asked.status_code == (200 if allowed else 403) and awaiting.status == "awaiting_review"
    if allowed:
        assert b'data-testid="confirm-veto"' in asked.content and b"reads past the row end" in asked.content
    response = people[who].post(url, {"reason": "reads past the row end", "confirm": "yes"})
    awaiting.refresh_from_db()
    assert response.status_code == (302 if allowed else 403)
    assert awaiting.status == ("vetoed" if allowed else "awaiting_review")
    if allowed:
        assert awaiting.decisions.last().reason_text == "reads past the row end"
        assert Event.objects.filter(type="candidate.vetoed").last().payload["confirmed"] == {"veto": True}


def test_a_veto_without_a_reason_shows_the_error_next_to_the_field(as_bob, awaiting):
    response = as_bob.post(reverse("candidate_veto", args=[awaiting.pk]), {"reason": "  "})
    assert response.status_code == 400 and b'data-testid="error-reason"' in response.content
    awaiting.refresh_from_db()
    assert awaiting.status == "awaiting_review"


def test_approving_twice_is_refused_with_a_message_not_an_error(as_bob, awaiting):
    as_bob.post(reverse("candidate_approve", args=[awaiting.pk]))
    response = as_bob.post(reverse("candidate_approve", args=[awaiting.pk]), follow=True)
    assert response.status_code == 200 and b"not awaiting review" in response.content
    assert Decision.objects.filter(candidate=awaiting, verdict="approve").count() == 1


def test_a_forged_post_without_csrf_is_refused(alice, awaiting):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.post(reverse("candidate_approve", args=[awaiting.pk])).status_code == 403
    awaiting.refresh_from_db()
    assert awaiting.status == "awaiting_review"


def test_approve_is_post_only(as_alice, awaiting):
    assert as_alice.get(reverse("candidate_approve", args=[awaiting.pk])).status_code == 405


@pytest.mark.parametrize("who, allowed", [("owner", True), ("reviewer", True), ("stranger", False)])
def test_pausing_resuming_and_stopping_a_run(people, alice, who, allowed):
    run = builders.make_run(alice)
    for action, status in (("pause", "paused"), ("resume", "running"), ("stop", "stopped")):
        response = people[who].post(reverse("run_action", args=[run.pk, action]))
        run.refresh_from_db()
        assert response.status_code == (302 if allowed else 403)
        assert run.status == (status if allowed else "running")


@pytest.mark.parametrize("action", ["advance", "start", "mark_exhausted", "finish"])
def test_a_run_action_outside_the_table_calls_no_service(as_alice, alice, action):
    run = builders.make_run(alice)
    events = Event.objects.count()
    response = as_alice.post(reverse("run_action", args=[run.pk, action]))
    run.refresh_from_db()
    assert response.status_code == 302 and run.status == "running"
    assert Event.objects.count() == events


def test_resuming_a_running_run_is_refused_with_a_message(as_alice, alice):
    run = builders.make_run(alice)
    response = as_alice.post(reverse("run_action", args=[run.pk, "resume"]), follow=True)
    assert b"cannot become running" in response.content


def test_the_run_page_shows_stages_speedups_and_reasons(as_charlie, alice):
    run = builders.make_run(alice)
    builders.evaluated(run, builders.passing_report(speedup=1.25), tag="a")
    builders.evaluated(run, builders.guard_report(), tag="b")
    running = builders.progress(builders.dispatch(builders.submit(run, tag="c")), "verify")
    page = as_charlie.get(reverse("run", args=[run.pk])).content.decode()
    assert 'data-testid="candidate-row-3" data-status="running"' in page and "verify:started" in page
    assert "guard:side_stream" in page and "awaiting review" in page
    assert 'data-testid="best-chart"' in page
    assert running.status == "running"


def test_a_cpu_mode_run_says_timings_need_a_gpu_worker(as_charlie, alice):
    run = builders.make_run(alice, hardware="cpu")
    builders.evaluated(run, builders.cpu_report())
    page = as_charlie.get(reverse("run", args=[run.pk])).content.decode()
    assert 'data-testid="cpu-mode"' in page and "timings need a GPU worker" in page


def test_a_run_on_a_queue_served_only_by_cpu_workers_is_cpu_mode(as_charlie, alice):
    from django.utils import timezone

    Worker.objects.create(name="w1", hardware="h200", fingerprint={"kind": "cpu"}, last_heartbeat=timezone.now())
    run = builders.make_run(alice, hardware="h200")
    assert b'data-testid="cpu-mode"' in as_charlie.get(reverse("run", args=[run.pk])).content


def test_the_dashboard_shows_active_runs_with_progress_and_the_decision_feed(as_charlie, alice):
    run = builders.make_run(alice, budget_candidates=4)
    builders.evaluated(run, builders.guard_report(), tag="a")
    page = as_charlie.get(reverse("dashboard")).content.decode()
    assert f'data-testid="progress-{run.pk}"' in page and "candidates 1 / 4" in page
    assert "guard:side_stream" in page
    assert Run.objects.get().status == "running" and Candidate.objects.get().status == "reverted"


def test_a_long_run_lists_one_page_of_candidates_with_those_awaiting_review_and_charts_them_all(as_charlie, alice):
    from loop.selectors import RUN_PAGE_ROWS

    run = builders.make_run(alice, budget_candidates=RUN_PAGE_ROWS + 20)
    first = builders.evaluated(run, builders.passing_report(speedup=1.25), tag="first")  # awaits review
    for i in range(RUN_PAGE_ROWS + 4):
        builders.submit(run, tag=f"n{i}")
    newest = RUN_PAGE_ROWS + 5
    page = as_charlie.get(reverse("run", args=[run.pk])).content.decode()
    rows = page.count('data-testid="candidate-row-')
    assert rows == RUN_PAGE_ROWS + 1  # the newest page, plus candidate 1 because it awaits review
    assert f'data-testid="candidate-row-{newest}"' in page and 'data-testid="candidate-row-1"' in page
    assert 'data-testid="candidate-row-5"' not in page and 'data-testid="older-candidates"' in page
    assert f"of {newest}, newest first, with every one awaiting review" in page
    assert "1 awaiting review" in page and '"x": [1]' in page.replace("\n", "")  # the chart's one timed point

    older = as_charlie.get(reverse("run", args=[run.pk]), {"page": 2}).content.decode()
    assert older.count('data-testid="candidate-row-') == 5
    assert 'data-testid="candidate-row-5"' in older and 'data-testid="candidate-row-1"' in older
    assert "1 awaiting review" in older  # the count is the whole run's on every page
    assert "?page=2" in older and 'data-testid="newer-candidates"' in older  # its live re-read keeps the page
    assert as_charlie.get(reverse("run", args=[run.pk]), {"page": "x"}).status_code == 200  # a bad page: the first
    assert first.status == "awaiting_review"
