"""Pings and heartbeats: a reviewer's ping is written with its audit event and its GPU task in one
transaction; a worker's answer is recorded once; a heartbeat says when the loop's capacity changed."""

import time
from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from gpu_worker.queues import Task, gpu_queue
from loop.models import Event, OutboxMessage, Ping, Worker
from loop.services.wiring import ping_record_pong, ping_send, worker_heartbeat_record

pytestmark = pytest.mark.django_db


def test_a_ping_writes_its_event_and_a_ping_task_for_the_hardware_queue(alice):
    ping = ping_send(actor=alice, hardware="h200")
    assert (ping.hardware, ping.actor, ping.answered) == ("h200", "alice", None)
    message = OutboxMessage.objects.get()
    assert (message.task, message.queue, message.args) == (Task.GPU_PING, gpu_queue("h200"), [ping.id])
    event = Event.objects.get(type="ping.sent")
    assert (event.actor, event.subject_id, event.payload) == ("alice", str(ping.id), {"hardware": "h200"})


def test_the_service_itself_refuses_a_ping_from_a_viewer(charlie):
    with pytest.raises(PermissionDenied):
        ping_send(actor=charlie, hardware="h200")
    assert not Ping.objects.exists() and not OutboxMessage.objects.exists()
    assert not Event.objects.filter(type="ping.sent").exists()


def test_a_second_answer_to_the_same_ping_changes_nothing(alice):
    ping = ping_send(actor=alice, hardware="h200")
    first = {"name": "gpu-a", "hardware": "h200", "fingerprint": {"gpu": "H200"}}
    assert ping_record_pong(ping_id=ping.id, worker=first) is True
    assert ping_record_pong(ping_id=ping.id, worker={**first, "name": "gpu-b"}) is False
    ping.refresh_from_db()
    assert (ping.worker, ping.fingerprint) == ("gpu-a", {"gpu": "H200"})
    (event,) = Event.objects.filter(type="ping.answered", subject_id=str(ping.id))
    assert (event.actor, event.payload["worker"], event.payload["gpu"]) == ("gpu-a", "gpu-a", "H200")
    assert event.payload["latency_ms"] >= 0


def test_a_worker_comes_alive_on_its_first_beat_and_after_a_silence_but_joins_once(settings):
    beat = {"name": "gpu-h200-0", "hardware": "h200", "sent_at": time.time(), "fingerprint": {"gpu": "H200"}}
    worker, came_alive = worker_heartbeat_record(beat=beat)
    assert came_alive is True
    assert worker_heartbeat_record(beat={**beat, "sent_at": time.time()})[1] is False
    silent_since = timezone.now() - timedelta(seconds=settings.ARK_HEARTBEAT_TIMEOUT_S + 60)
    Worker.objects.filter(pk=worker.pk).update(last_heartbeat=silent_since)
    assert worker_heartbeat_record(beat={**beat, "sent_at": time.time()})[1] is True
    assert Worker.objects.count() == 1
    (joined,) = Event.objects.filter(type="worker.joined")
    assert (joined.subject_id, joined.payload) == (str(worker.pk), {"hardware": "h200", "gpu": "H200"})


def test_a_heartbeat_from_the_future_is_recorded_as_now_and_an_old_one_does_not_revive_a_worker(settings):
    before = timezone.now()
    worker, _ = worker_heartbeat_record(beat={"name": "w", "hardware": "h200", "sent_at": time.time() + 86400})
    assert before <= worker.last_heartbeat <= timezone.now()  # a skewed clock cannot keep a worker alive
    stale = (timezone.now() - timedelta(seconds=settings.ARK_HEARTBEAT_TIMEOUT_S + 60)).timestamp()
    worker, came_alive = worker_heartbeat_record(beat={"name": "late", "hardware": "h200", "sent_at": stale})
    assert came_alive is False
