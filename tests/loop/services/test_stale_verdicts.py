"""No stale verdicts: a candidate awaiting review says what it was measured against once the incumbent or
the serving config moves on; approving it then needs a confirmation the event records; a re-benchmark
queues the same source against the current incumbent; four eyes (loop/staleness.py, decisions.py)."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from loop.models import Event, OutboxMessage
from loop.services.candidates import candidate_rebenchmark
from loop.services.decisions import StaleVerdict, candidate_approve, candidate_veto, four_eyes_check
from loop.services.deployments import deployment_promote
from loop.staleness import candidate_staleness, measured_against_text
from tests.console import builders

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_waiting(alice):
    run = builders.make_run(alice)
    first = builders.evaluated(run, builders.passing_report(speedup=1.2), tag="first")
    second = builders.evaluated(run, builders.passing_report(speedup=1.3), tag="second")
    return run, first, second


def test_after_another_approval_a_waiting_candidate_is_stale_and_says_against_what(two_waiting, bob):
    run, first, second = two_waiting
    assert second.measured_against_id is None and candidate_staleness(second) is None
    candidate_approve(candidate=first, actor=bob)
    second.refresh_from_db()
    stale = candidate_staleness(second)
    assert stale.text == f"measured against the default kernel, superseded by #{first.number}"


def test_approving_a_stale_candidate_needs_confirmation_and_the_event_records_it(two_waiting, bob):
    run, first, second = two_waiting
    candidate_approve(candidate=first, actor=bob)
    with pytest.raises(StaleVerdict, match="superseded by #1"):
        candidate_approve(candidate=second, actor=bob)
    second.refresh_from_db()
    assert second.status == "awaiting_review"
    candidate_approve(candidate=second, actor=bob, confirm_stale=True)
    second.refresh_from_db()
    assert second.status == "kept" and "Confirmed although measured against" in second.reason_text
    event = Event.objects.filter(type="candidate.approved").last()
    assert event.payload["confirmed"]["stale"]["incumbent_now"] == first.number
    first_event = Event.objects.filter(type="candidate.approved").first()
    assert first_event.payload["confirmed"] == {}


def test_a_new_serving_config_makes_a_waiting_candidate_stale(alice, bob, dana):
    run = builders.make_run(alice)
    kept = builders.evaluated(run, builders.passing_report(crossover_at=None), tag="kept")
    candidate_approve(candidate=kept, actor=bob)
    waiting = builders.evaluated(run, builders.passing_report(speedup=1.4), tag="waiting")
    assert waiting.measured_against_id == kept.pk and waiting.measured_config_version is None
    assert candidate_staleness(waiting) is None
    deployment_promote(actor=dana, candidate=kept, routes=[{"lo": 0, "hi": None, "kernel": "candidate"}])
    assert candidate_staleness(waiting).text == "serving config was no serving config, now v1"
    assert measured_against_text(waiting) == f"measured against candidate #{kept.number}"
    later = builders.evaluated(run, builders.passing_report(speedup=1.5), tag="later")
    assert measured_against_text(later) == f"measured against candidate #{kept.number}, serving config v1"
    assert candidate_staleness(later) is None


def test_a_rebenchmark_queues_the_same_source_against_the_current_incumbent(two_waiting, bob, charlie):
    run, first, second = two_waiting
    candidate_approve(candidate=first, actor=bob)
    with pytest.raises(PermissionDenied):
        candidate_rebenchmark(candidate=second, actor=charlie)
    attempt = second.attempt
    candidate_rebenchmark(candidate=second, actor=bob)
    second.refresh_from_db()
    assert (second.status, second.attempt, second.measured_against_id) == ("queued", attempt + 1, first.pk)
    spec = OutboxMessage.objects.filter(task="gpu.evaluate").last().args[0]
    assert (spec["candidate_id"], spec["incumbent_id"], spec["source"]) == (second.pk, first.pk, second.source)
    assert Event.objects.filter(type="candidate.rebenchmark").last().payload["stale"].startswith("measured against")
    builders.progress(second, "benchmark")
    builders.report(second, builders.passing_report(speedup=1.3))
    second.refresh_from_db()
    assert second.status == "awaiting_review" and candidate_staleness(second) is None


def test_a_veto_records_that_it_was_confirmed(two_waiting, bob):
    run, first, second = two_waiting
    candidate_veto(candidate=first, actor=bob, reason="reads past the row end", confirmed=True)
    assert Event.objects.filter(type="candidate.vetoed").last().payload["confirmed"] == {"veto": True}


def test_four_eyes_is_off_by_default_and_stops_the_run_starter_when_on(two_waiting, alice, bob, settings):
    run, first, second = two_waiting
    four_eyes_check(actor=alice, candidate=first)  # off: alice started the run and may approve
    settings.ARK_FOUR_EYES = True
    with pytest.raises(PermissionDenied, match="four eyes: alice started its run"):
        candidate_approve(candidate=first, actor=alice)
    candidate_approve(candidate=first, actor=bob)


def test_four_eyes_for_one_team_only(two_waiting, alice, bob, settings):
    from django.contrib.auth.models import Group

    run, first, second = two_waiting
    settings.ARK_FOUR_EYES = False
    settings.ARK_FOUR_EYES_TEAMS = ["kernels-team"]
    four_eyes_check(actor=alice, candidate=first)  # alice is not in the team
    alice.groups.add(Group.objects.create(name="kernels-team"))
    with pytest.raises(PermissionDenied, match="four eyes"):
        four_eyes_check(actor=alice, candidate=first)
    four_eyes_check(actor=bob, candidate=first)


def test_a_rebenchmark_with_routes_sends_them_to_the_e2e_gate_and_a_plain_one_clears_them(two_waiting, bob):
    run, first, second = two_waiting
    boxes = [{"bounds": {"rows": [1, 5], "n_ctx": [0, None]}, "kernel": "candidate"}]
    with pytest.raises(ValidationError, match="non-empty list of boxes"):
        candidate_rebenchmark(candidate=second, actor=bob, e2e_routes=[{"lo": 0, "hi": None}])
    candidate_rebenchmark(candidate=second, actor=bob, e2e_routes=boxes)
    spec = OutboxMessage.objects.filter(task="gpu.evaluate").last().args[0]
    assert spec["e2e_routes"] == boxes
    assert Event.objects.filter(type="candidate.rebenchmark").last().payload["e2e_routes"] == boxes
    builders.progress(second, "benchmark")
    builders.report(second, builders.passing_report(speedup=1.3))
    candidate_rebenchmark(candidate=second, actor=bob)
    assert OutboxMessage.objects.filter(task="gpu.evaluate").last().args[0]["e2e_routes"] is None
