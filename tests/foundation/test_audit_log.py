import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, transaction

from loop.audit import audit_unlocked, event_write, verify_chain
from loop.models import Event


def write_events(actor, n=3):
    for i in range(n):
        with transaction.atomic():
            event_write(type="test.happened", actor=actor, payload={"i": i, "note": "x" * i})


@pytest.mark.django_db
def test_events_form_an_intact_chain(alice):
    write_events(alice)
    events = list(Event.objects.order_by("id"))
    assert [e.prev_hash for e in events[1:]] == [e.hash for e in events[:-1]]
    assert verify_chain() == []
    call_command("verify_audit")


@pytest.mark.django_db
def test_the_database_refuses_update(alice):
    write_events(alice, 1)
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        Event.objects.update(actor="mallory")
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("UPDATE loop_event SET payload = %s", ['{"forged": true}'])


@pytest.mark.django_db
def test_the_database_refuses_delete(alice):
    write_events(alice, 2)
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        Event.objects.all().delete()
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM loop_event")
    assert Event.objects.count() == 2


@pytest.mark.django_db
def test_verify_audit_detects_a_tampered_row(alice):
    write_events(alice, 3)
    middle = Event.objects.order_by("id")[1]
    with audit_unlocked(), transaction.atomic():
        Event.objects.filter(id=middle.id).update(payload={"i": 99})
    problems = verify_chain()
    assert problems == [f"event {middle.id}: stored hash does not match its contents"]
    with pytest.raises(CommandError, match="audit chain broken"):
        call_command("verify_audit")


@pytest.mark.django_db
def test_verify_audit_detects_a_removed_event(alice):
    write_events(alice, 3)
    last = Event.objects.order_by("id").last()
    with audit_unlocked(), transaction.atomic():
        Event.objects.filter(id=last.id).delete()
    assert verify_chain() == ["the chain's head does not match the last event (events removed at the end?)"]


@pytest.mark.django_db(transaction=True)
def test_event_write_outside_a_transaction_is_refused(alice):
    with pytest.raises(RuntimeError, match="inside the service's transaction"):
        event_write(type="test.happened", actor=alice)
