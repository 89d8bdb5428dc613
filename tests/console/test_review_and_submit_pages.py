"""The pages of issue 22's second half: a stale candidate says what it was measured against and asks before
approval, a re-benchmark from the page, a person's submit page (guard check before anything is queued), a
run with no live worker says so, and a new thesis's hardware defaults to what live workers report."""

import time
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from loop.models import Candidate, Event, OutboxMessage
from loop.services.decisions import candidate_approve
from loop.services.wiring import worker_heartbeat_record
from tests.console import builders

pytestmark = pytest.mark.django_db
BEST = Path(__file__).resolve().parents[2] / "gpu_worker" / "candidates" / "dsa_topk" / "best.py"


@pytest.fixture
def stale(alice, bob):
    run = builders.make_run(alice)
    first = builders.evaluated(run, builders.passing_report(speedup=1.2), tag="first")
    second = builders.evaluated(run, builders.passing_report(speedup=1.3), tag="second")
    candidate_approve(candidate=first, actor=bob)
    return run, first, second


def test_the_run_and_candidate_pages_say_what_a_stale_candidate_was_measured_against(as_bob, stale):
    run, first, second = stale
    page = as_bob.get(reverse("run", args=[run.pk])).content.decode()
    assert f'data-testid="stale-{second.number}"' in page
    assert f"measured against the default kernel, superseded by #{first.number}" in page
    assert f'data-testid="rebenchmark-{second.number}"' in page
    candidate_page = as_bob.get(reverse("candidate", args=[second.pk])).content.decode()
    assert 'data-testid="stale-review"' in candidate_page and "superseded by #1" in candidate_page


def test_approving_a_stale_candidate_shows_a_confirmation_then_the_confirmed_post_approves(as_bob, stale):
    run, first, second = stale
    url = reverse("candidate_approve", args=[second.pk])
    asked = as_bob.post(url, {"note": "still better", "next": "run"})
    second.refresh_from_db()
    assert asked.status_code == 200 and second.status == "awaiting_review"
    assert b'data-testid="confirm-approve"' in asked.content and b"superseded by #1" in asked.content
    done = as_bob.post(url, {"note": "still better", "next": "run", "confirm": "yes"})
    second.refresh_from_db()
    assert done.status_code == 302 and done["Location"] == reverse("run", args=[run.pk])
    assert second.status == "kept"
    assert Event.objects.filter(type="candidate.approved").last().payload["confirmed"]["stale"]["incumbent_now"] == 1


def test_a_fresh_candidate_is_approved_without_a_confirmation(as_bob, alice):
    run = builders.make_run(alice)
    fresh = builders.evaluated(run, builders.passing_report(), tag="fresh")
    assert as_bob.post(reverse("candidate_approve", args=[fresh.pk])).status_code == 302
    fresh.refresh_from_db()
    assert fresh.status == "kept"


def test_the_rebenchmark_button_queues_it_against_the_current_incumbent(as_bob, as_charlie, stale):
    run, first, second = stale
    url = reverse("candidate_rebenchmark", args=[second.pk])
    assert as_charlie.post(url).status_code == 403
    assert as_bob.post(url, {"next": "run"}).status_code == 302
    second.refresh_from_db()
    assert second.status == "queued" and second.measured_against_id == first.pk
    assert OutboxMessage.objects.filter(task="gpu.evaluate").last().args[0]["incumbent_id"] == first.pk


def test_the_submit_page_starts_from_the_incumbent_and_checks_before_queueing(as_bob, as_charlie, alice, bob):
    run = builders.make_run(alice)
    kept = builders.evaluated(run, builders.passing_report(crossover_at=None), tag="kept")
    candidate_approve(candidate=kept, actor=bob)
    url = reverse("run_submit", args=[run.pk])
    assert as_charlie.get(url).status_code == 403
    page = as_bob.get(url).content.decode()
    assert "variant kept" in page and "the incumbent, candidate 1" in page and 'data-editor="python"' in page

    before = Candidate.objects.count()
    # the builders' source defines a kernel it never launches: the guard says so, nothing is stored
    checked = as_bob.post(url, {"source": builders.source_variant("mine"), "action": "submit"})
    assert checked.status_code == 400 and b"guard:no_dsl" in checked.content
    env = BEST.read_text().replace("def forward", "import os\ndef forward", 1)
    checked = as_bob.post(url, {"source": env, "action": "check"})
    assert checked.status_code == 200 and b"guard:env" in checked.content
    assert Candidate.objects.count() == before

    good = BEST.read_text()
    upload = SimpleUploadedFile("mine.py", good.encode(), content_type="text/x-python")
    checked = as_bob.post(url, {"source": "", "upload": upload, "action": "check"})
    assert b'data-testid="check-ok"' in checked.content and Candidate.objects.count() == before
    done = as_bob.post(url, {"source": good, "note": "the best so far", "action": "submit"})
    candidate = Candidate.objects.get(run=run, proposer="human")
    assert done.status_code == 302 and done["Location"] == reverse("candidate", args=[candidate.pk])
    assert candidate.author == bob and candidate.parent_id == kept.pk and candidate.proposal["note"] == "the best so far"


def test_a_run_with_no_live_worker_says_so_on_the_run_page_and_the_dashboard(as_bob, alice, settings):
    run = builders.make_run(alice, hardware="h200")
    text = "waiting for an h200 worker; none has ever sent a heartbeat"
    assert text in as_bob.get(reverse("run", args=[run.pk])).content.decode()
    assert text in as_bob.get(reverse("dashboard")).content.decode()
    worker_heartbeat_record(beat={"name": "gpu0", "hardware": "h200", "sent_at": time.time(),
                                  "fingerprint": {"kind": "h200"}})
    assert 'data-testid="run-waiting"' not in as_bob.get(reverse("run", args=[run.pk])).content.decode()
    settings.ARK_HEARTBEAT_TIMEOUT_S = -1  # every heartbeat is now too old
    page = as_bob.get(reverse("run", args=[run.pk])).content.decode()
    assert "waiting for an h200 worker; none seen since" in page


def test_a_new_thesis_defaults_to_the_hardware_live_workers_report(as_bob):
    assert 'value="h200"' in as_bob.get(reverse("thesis_new")).content.decode()
    worker_heartbeat_record(beat={"name": "gpu-b", "hardware": "b200", "sent_at": time.time(),
                                  "fingerprint": {"kind": "b200"}})
    assert 'value="b200"' in as_bob.get(reverse("thesis_new")).content.decode()


def test_under_four_eyes_the_run_starter_may_not_promote_alone(alice, bob, settings):
    from django.contrib.auth.models import Group
    from django.test import Client

    from loop.models import ServingConfig

    run = builders.make_run(alice)
    kept = builders.evaluated(run, builders.passing_report(crossover_at=None), tag="kept")
    candidate_approve(candidate=kept, actor=bob)
    alice.groups.add(Group.objects.get(name="deployer"))
    client = Client()
    client.force_login(alice)
    settings.ARK_FOUR_EYES = True
    body = {"based_on": 0, "note": "", "password": "alice-password-1"}  # its winning regions (a dsa_topk grid)
    response = client.post(reverse("candidate_regions_promote", args=[kept.pk]), body)
    assert response.status_code in (400, 403) and not ServingConfig.objects.exists()
    assert "four eyes" in response.content.decode().lower()
    settings.ARK_FOUR_EYES = False  # the setting is what refused it
    assert client.post(reverse("candidate_regions_promote", args=[kept.pk]), body).status_code == 302
    assert ServingConfig.objects.count() == 1
