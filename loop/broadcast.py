"""Push committed events to browsers over the channel layer.

At most once (docs/architecture.md, Reliability of the messages): every message carries the event's sequence number, and a page that
sees a gap or reconnects re-reads its state over HTTP. A socket's first message is the newest sequence number
of its group (console/consumers.py), so a page also re-reads what was published before its socket joined.
"""

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from loop.models import Event

log = logging.getLogger(__name__)
ALL_EVENTS_GROUP = "events"


def run_group(run_id) -> str:
    return f"run-{run_id}"


def newest_seq(run_id=None) -> int:
    """The sequence number of the newest event sent to a run's group (or to every page, without a run)."""
    events = Event.objects.all() if run_id is None else Event.objects.filter(run_id=run_id)
    return events.order_by("-id").values_list("id", flat=True).first() or 0


def event_message(event) -> dict:
    return {
        "type": "ark.event",
        "seq": event.id,
        "event": event.type,
        "actor": event.actor,
        "subject_type": event.subject_type,
        "subject_id": event.subject_id,
        "run_id": event.run_id,
        "payload": event.payload,
        "created": event.created.isoformat(),
    }


def broadcast_event(event) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    message = event_message(event)
    try:
        async_to_sync(layer.group_send)(ALL_EVENTS_GROUP, message)
        if event.run_id is not None:
            async_to_sync(layer.group_send)(run_group(event.run_id), message)
    except Exception:  # the database is the truth; a lost push is repaired by the client's resync
        log.warning("could not broadcast event %s", event.id, exc_info=True)
