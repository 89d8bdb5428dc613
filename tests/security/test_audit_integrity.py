"""Issue 26, attack 4: an admin changed a candidate through /admin/ without an event, and with write access to
the database one could edit events, recompute the plain SHA-256 chain and have verify_audit say intact. The
admin is read-only for domain state; the chain is an HMAC keyed outside the database; every committed event
is anchored in a file outside it."""

import hashlib
import json

import pytest
from django.contrib import admin
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import transaction
from django.test import Client
from django.urls import reverse

from loop import audit
from loop.models import AuditHead, Candidate, Event

pytestmark = pytest.mark.django_db


@pytest.fixture
def anchor(settings, tmp_path):
    settings.ARK_AUDIT_ANCHOR = str(tmp_path / "anchor.log")
    return tmp_path / "anchor.log"


def write_events(actor, n, capture):
    for i in range(n):
        with capture(execute=True), transaction.atomic():
            audit.event_write(type="test.happened", actor=actor, payload={"i": i})


def rewrite_chain(hasher) -> None:
    """What the red team did: the triggers lifted, the middle event edited, every hash after it recomputed
    and the head moved, all with database access only."""
    events = list(Event.objects.order_by("id"))
    prev = audit.GENESIS
    with audit.audit_unlocked(), transaction.atomic():
        for index, event in enumerate(events):
            payload = {"i": 99} if index == 1 else event.payload
            digest = hasher(prev, event, payload)
            Event.objects.filter(id=event.id).update(payload=payload, prev_hash=prev, hash=digest)
            prev = digest
        AuditHead.objects.filter(pk=1).update(last_hash=prev)


def plain_sha256(prev, event, payload):
    body = json.dumps({"prev": prev, "type": event.type, "actor": event.actor, "subject_type": event.subject_type,
                       "subject_id": event.subject_id, "run_id": event.run_id, "payload": payload,
                       "created": event.created.isoformat(timespec="microseconds")},
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()


def with_the_key(prev, event, payload):
    return audit.event_hash(prev_hash=prev, type=event.type, actor=event.actor, subject_type=event.subject_type,
                            subject_id=event.subject_id, run_id=event.run_id, payload=payload, created=event.created)


def test_a_chain_recomputed_without_the_key_is_detected(alice, anchor, django_capture_on_commit_callbacks):
    write_events(alice, 3, django_capture_on_commit_callbacks)
    assert audit.verify_chain() == []
    anchor.unlink()  # even with no anchor at all, the keyed chain alone shows the rewrite
    rewrite_chain(plain_sha256)
    problems = audit.verify_chain()
    assert len(problems) == 3 and all("stored hash does not match its contents" in p for p in problems)
    with pytest.raises(CommandError, match="audit chain broken"):
        call_command("verify_audit")


def test_a_chain_recomputed_with_the_key_is_caught_by_the_anchor(alice, anchor, django_capture_on_commit_callbacks):
    write_events(alice, 3, django_capture_on_commit_callbacks)
    assert len(anchor.read_text().splitlines()) == 3
    rewrite_chain(with_the_key)
    problems = audit.verify_chain()
    middle, last = Event.objects.order_by("id")[1:3]
    assert problems == [f"event {middle.id}: its hash differs from the one anchored in anchor.log (history rewritten)",
                        f"event {last.id}: its hash differs from the one anchored in anchor.log (history rewritten)"]


def test_events_cut_from_the_end_are_caught_by_the_anchor(alice, anchor, django_capture_on_commit_callbacks):
    write_events(alice, 3, django_capture_on_commit_callbacks)
    last = Event.objects.order_by("id").last()
    with audit.audit_unlocked(), transaction.atomic():
        Event.objects.filter(id=last.id).delete()
        AuditHead.objects.filter(pk=1).update(last_hash=Event.objects.order_by("id").last().hash)
    assert audit.verify_chain() == [f"event {last.id}: anchored in anchor.log but missing from the database"]


def test_the_key_comes_from_settings_not_the_database(settings, alice, django_capture_on_commit_callbacks, anchor):
    write_events(alice, 1, django_capture_on_commit_callbacks)
    assert audit.verify_chain() == []
    settings.ARK_AUDIT_KEY = "another-key"
    assert audit.verify_chain() == [f"event {Event.objects.get().id}: stored hash does not match its contents"]


def test_the_admin_cannot_change_domain_state(alice, world):
    alice.is_superuser = alice.is_staff = True
    alice.save()
    client = Client()
    client.force_login(alice)
    candidate = world["candidate"]
    domain_events = Event.objects.exclude(type__startswith="auth.")
    before = (candidate.status, candidate.source, domain_events.count())
    url = reverse("admin:loop_candidate_change", args=[candidate.pk])
    response = client.post(url, {"status": "kept", "source": "forged", "number": candidate.number})
    candidate.refresh_from_db()
    assert response.status_code == 403
    assert (candidate.status, candidate.source, domain_events.count()) == before
    assert client.post(reverse("admin:loop_candidate_delete", args=[candidate.pk]), {"post": "yes"}).status_code == 403
    assert Candidate.objects.filter(pk=candidate.pk).exists()
    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label == "loop":
            request = type("R", (), {"user": alice})()
            assert not model_admin.has_change_permission(request), model
            assert not model_admin.has_add_permission(request) and not model_admin.has_delete_permission(request)
