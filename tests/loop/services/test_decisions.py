"""A reviewer's approve and veto: a decided candidate is not decided again; four eyes stops the person who
submitted a candidate from approving it, never from vetoing it; the approval's reason names the reviewer."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from loop.models import Candidate, Decision, Event, Run
from loop.services.decisions import candidate_approve, candidate_veto, four_eyes_check
from tests.console import builders

pytestmark = pytest.mark.django_db


def waiting(run, **kwargs):
    candidate = builders.evaluated(run, builders.passing_report(speedup=1.2), **kwargs)
    assert candidate.status == Candidate.Status.AWAITING_REVIEW
    return candidate


def test_a_vetoed_candidate_can_be_neither_approved_nor_vetoed_again(alice, bob):
    run = builders.make_run(alice)
    candidate = waiting(run)
    candidate_veto(candidate=candidate, actor=bob, reason="reads past the row end")
    with pytest.raises(ValidationError, match="is vetoed, not awaiting review"):
        candidate_approve(candidate=candidate, actor=alice)
    with pytest.raises(ValidationError, match="is vetoed, not awaiting review"):
        candidate_veto(candidate=candidate, actor=alice, reason="also slow")
    candidate.refresh_from_db()
    assert (candidate.status, candidate.reason_text) == ("vetoed", "reads past the row end")
    assert list(candidate.decisions.exclude(actor="policy").values_list("verdict", "actor")) == [("veto", "bob")]
    assert Run.objects.get(pk=run.pk).incumbent is None


def test_under_four_eyes_the_submitter_may_not_approve_what_they_submitted(alice, bob, settings):
    settings.ARK_FOUR_EYES = True
    run = builders.make_run(alice)
    candidate = waiting(run, author=bob)
    with pytest.raises(PermissionDenied, match="four eyes: bob submitted it"):
        candidate_approve(candidate=candidate, actor=bob)
    with pytest.raises(PermissionDenied, match="four eyes: alice started its run"):
        candidate_approve(candidate=candidate, actor=alice)
    assert Candidate.objects.get(pk=candidate.pk).status == "awaiting_review"
    assert not Decision.objects.filter(candidate=candidate, user__isnull=False).exists()
    settings.ARK_FOUR_EYES = False
    candidate_approve(candidate=candidate, actor=bob)  # off, the submitter may approve
    assert Run.objects.get(pk=run.pk).incumbent_id == candidate.pk


def test_four_eyes_never_stops_the_run_starter_from_vetoing(alice, settings):
    settings.ARK_FOUR_EYES = True
    candidate = waiting(builders.make_run(alice), author=alice)
    candidate_veto(candidate=candidate, actor=alice, reason="my own mistake")
    assert Candidate.objects.get(pk=candidate.pk).status == "vetoed"


def test_four_eyes_teams_may_be_given_as_comma_separated_text(alice, bob, settings):
    from django.contrib.auth.models import Group

    settings.ARK_FOUR_EYES = False
    settings.ARK_FOUR_EYES_TEAMS = " kernels-team , ,serving"
    candidate = waiting(builders.make_run(alice))
    four_eyes_check(actor=alice, candidate=candidate)  # not in either team yet
    alice.groups.add(Group.objects.create(name="serving"))
    with pytest.raises(PermissionDenied, match="four eyes: alice started its run"):
        four_eyes_check(actor=alice, candidate=candidate)
    bob.groups.add(Group.objects.get_or_create(name="serving")[0])
    four_eyes_check(actor=bob, candidate=candidate)  # in the team, but bob neither submitted nor started it


def test_an_approval_records_the_reviewer_and_their_note_in_its_reason(alice, bob):
    candidate = waiting(builders.make_run(alice))
    decision = candidate_approve(candidate=candidate, actor=bob, note="read the diff")
    assert (decision.actor, decision.reason_code, decision.reason_text) == (
        "bob", "approved", "Approved by bob: read the diff")
    event = Event.objects.get(type="candidate.approved", subject_id=str(candidate.pk))
    assert (event.payload["note"], event.payload["confirmed"]) == ("read the diff", {})
    other = waiting(builders.make_run(alice), tag="b")
    assert candidate_approve(candidate=other, actor=bob).reason_text == "Approved by bob."
