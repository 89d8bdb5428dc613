"""Pings and heartbeats: proof that loop, broker and GPU workers are connected."""

from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from gpu_worker.queues import Task, gpu_queue
from loop.audit import event_write
from loop.hardware import hardware_registered_slug
from loop.models import Ping, Worker
from loop.roles import EDIT_THESIS, check_permission
from loop.services.outbox import outbox_enqueue


def ping_send(*, actor, hardware: str) -> Ping:
    """A reviewer's wiring check to a registered hardware kind's queue (docs/security.md)."""
    check_permission(actor, EDIT_THESIS)
    hardware = hardware_registered_slug(hardware)
    with transaction.atomic():
        ping = Ping.objects.create(hardware=hardware, actor=actor.get_username())
        event_write(type="ping.sent", actor=actor, subject=ping, payload={"hardware": hardware})
        outbox_enqueue(task=Task.GPU_PING, queue=gpu_queue(hardware), args=[ping.id])
    return ping


def ping_record_pong(*, ping_id: int, worker: dict) -> bool:
    """Record a worker's answer; a second answer to the same ping changes nothing."""
    with transaction.atomic():
        answered = Ping.objects.filter(id=ping_id, answered__isnull=True).update(
            answered=timezone.now(), worker=worker["name"], fingerprint=worker.get("fingerprint", {}),
        )
        if not answered:
            return False
        ping = Ping.objects.get(id=ping_id)
        latency_ms = (ping.answered - ping.sent).total_seconds() * 1000
        event_write(type="ping.answered", actor=worker["name"], subject=ping, payload={
            "hardware": worker["hardware"], "worker": worker["name"],
            "gpu": worker.get("fingerprint", {}).get("gpu") or "cpu", "latency_ms": round(latency_ms, 1),
        })
    return True


def worker_heartbeat_record(*, beat: dict) -> tuple[Worker, bool]:
    """Upsert the worker's last heartbeat; returns (worker, came_alive). `came_alive` is True when the
    worker was unknown or silent past the heartbeat timeout: only then has the loop's capacity changed.
    Not an audited state change: it happens every few seconds; only a first appearance writes an Event."""
    sent_at = datetime.fromtimestamp(beat.get("sent_at") or timezone.now().timestamp(), tz=dt_timezone.utc)
    live_since = timezone.now() - timedelta(seconds=settings.ARK_HEARTBEAT_TIMEOUT_S)
    with transaction.atomic():
        was_live = Worker.objects.filter(name=beat["name"], hardware=beat["hardware"],
                                         last_heartbeat__gte=live_since).exists()
        worker, created = Worker.objects.update_or_create(
            name=beat["name"],
            defaults={"hardware": beat["hardware"], "fingerprint": beat.get("fingerprint", {}),
                      "last_heartbeat": min(sent_at, timezone.now())},
        )
        if created:
            event_write(type="worker.joined", actor=beat["name"], subject=worker,
                        payload={"hardware": beat["hardware"], "gpu": beat.get("fingerprint", {}).get("gpu")})
    return worker, not was_live and worker.last_heartbeat >= live_since
