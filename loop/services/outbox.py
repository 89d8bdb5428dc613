"""Publish tasks through an outbox row written in the service's own transaction.

A crash between commit and publish loses nothing: `outbox_relay` runs after every commit and again
from the reaper for anything still unsent. A message may be published twice; every task is
idempotent.
"""

import logging

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from gpu_worker.queues import ATTEMPT_TTL_S, Task, attempt_fence, attempt_key
from loop.models import OutboxMessage

log = logging.getLogger(__name__)


def outbox_enqueue(*, task: str, queue: str, args: list) -> OutboxMessage:
    message = OutboxMessage.objects.create(task=task, queue=queue, args=args)
    transaction.on_commit(lambda: outbox_relay(ids=[message.id]))
    return message


def outbox_relay(*, ids: list[int] | None = None, older_than_s: float = 0.0) -> int:
    """Publish unsent messages (the given ones, or all older than `older_than_s`); returns the count sent."""
    pending = OutboxMessage.objects.filter(sent__isnull=True)
    if ids is not None:
        pending = pending.filter(id__in=ids)
    else:
        pending = pending.filter(created__lte=timezone.now() - timezone.timedelta(seconds=older_than_s))
    sent = 0
    for message in pending.order_by("id")[:500]:
        if message.task == Task.GPU_EVALUATE:
            _fence_attempt(message.args[0])
        try:
            # one try, bounded by the broker's socket timeouts (gpu_worker/broker.py): this runs in the request
            # that committed, and the row is the retry (the reaper relays what is unsent)
            current_app.send_task(message.task, args=message.args, queue=message.queue, retry=False)
        except Exception:  # broker down: the reaper retries
            OutboxMessage.objects.filter(id=message.id).update(attempts=message.attempts + 1)
            log.warning("outbox message %s not published", message.id, exc_info=True)
            continue
        sent += OutboxMessage.objects.filter(id=message.id, sent__isnull=True).update(sent=timezone.now())
    return sent


def _fence_attempt(spec: dict) -> None:
    """Before an evaluation is published, tell GPU workers which attempt is current (queues.attempt_key):
    a re-delivered message of an earlier attempt is then skipped, not evaluated."""
    fence = attempt_fence(getattr(settings, "CELERY_BROKER_URL", "") or "")
    if fence is None:
        return
    try:
        fence.set(attempt_key(spec["candidate_id"]), int(spec["attempt"]), ex=ATTEMPT_TTL_S)
    except Exception:  # broker down: the send below fails too and the reaper retries both
        log.warning("attempt fence of candidate %s not set", spec.get("candidate_id"), exc_info=True)
