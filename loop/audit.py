"""The append-only, hash-chained event log.

Every service writes its Event through `event_write` inside its own transaction. The database
refuses UPDATE and DELETE on loop_event (triggers, see migration 0002); the hash chain catches
anything done around them (a dropped trigger, a restored backup). Each link is an HMAC keyed with
ARK_AUDIT_KEY, which lives outside the database, so write access to the database alone cannot
recompute a rewritten chain; and each committed event's (seq, hash) is appended to an anchor file
outside the database, so a history rewritten even with the key (or cut short) no longer matches it.
What this proves against whom: docs/security.md.
"""

import contextlib
import datetime as dt
import hashlib
import hmac
import json
import logging
import os
import threading
from pathlib import Path

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from django.db.backends.signals import connection_created
from django.utils import timezone

from loop.models import AuditHead, Event

GENESIS = "0" * 64
_unlocked = threading.local()
log = logging.getLogger(__name__)


def _key() -> bytes:
    """ARK_AUDIT_KEY, else a key derived from SECRET_KEY: both outside the database."""
    configured = getattr(settings, "ARK_AUDIT_KEY", "")
    if configured:
        return configured.encode()
    return hmac.new(settings.SECRET_KEY.encode(), b"ark audit chain", hashlib.sha256).digest()


def anchor_path() -> Path:
    """ARK_AUDIT_ANCHOR, else a file under the var directory named after the database it anchors."""
    configured = getattr(settings, "ARK_AUDIT_ANCHOR", "")
    if configured:
        return Path(configured)
    name = Path(str(connection.settings_dict.get("NAME") or "db")).name
    return Path(settings.VAR_DIR) / f"audit-anchor-{name}.log"


def anchor_append(seq: int, digest: str) -> None:
    """One line per committed event, appended (O_APPEND: lines from several processes never interleave)."""
    path = anchor_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        try:
            os.write(fd, f"{seq} {digest}\n".encode())
        finally:
            os.close(fd)
    except OSError as error:  # the event is committed; a missing anchor line shows up in verify_audit
        log.error("audit anchor %s: could not append event %s: %s", path, seq, error)


def _canonical(value) -> str:
    return json.dumps(value, cls=DjangoJSONEncoder, sort_keys=True, separators=(",", ":"))


def event_hash(*, prev_hash: str, type: str, actor: str, subject_type: str, subject_id: str,
               run_id, payload: dict, created) -> str:
    body = _canonical({
        "prev": prev_hash, "type": type, "actor": actor, "subject_type": subject_type,
        "subject_id": subject_id, "run_id": run_id, "payload": payload,
        "created": created.astimezone(dt.UTC).isoformat(timespec="microseconds"),
    })
    return hmac.new(_key(), body.encode(), hashlib.sha256).hexdigest()


def event_write(*, type: str, actor, subject=None, payload: dict | None = None, run_id=None):
    """Append one event to the chain. Call inside the service's transaction."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("event_write must run inside the service's transaction")
    actor_name = actor if isinstance(actor, str) else actor.get_username()
    subject_type = subject._meta.model_name if subject is not None else ""
    subject_id = str(subject.pk) if subject is not None else ""
    payload = json.loads(_canonical(payload or {}))
    head, _ = AuditHead.objects.select_for_update().get_or_create(pk=1, defaults={"last_hash": GENESIS})
    created = timezone.now()
    digest = event_hash(prev_hash=head.last_hash, type=type, actor=actor_name, subject_type=subject_type,
                        subject_id=subject_id, run_id=run_id, payload=payload, created=created)
    event = Event.objects.create(
        type=type, actor=actor_name, subject_type=subject_type, subject_id=subject_id, run_id=run_id,
        payload=payload, created=created, prev_hash=head.last_hash, hash=digest,
    )
    AuditHead.objects.filter(pk=1).update(last_hash=digest)
    # local: Channels' layer is needed only once an event commits
    from loop.broadcast import broadcast_event

    transaction.on_commit(lambda: anchor_append(event.id, digest))
    transaction.on_commit(lambda: broadcast_event(event))
    return event


def verify_chain() -> list[str]:
    """Problems found in the chain, oldest first; an empty list means it is intact."""
    problems, prev = [], GENESIS
    for event in Event.objects.order_by("id").iterator():
        if event.prev_hash != prev:
            problems.append(f"event {event.id}: prev_hash does not match event before it")
        expected = event_hash(prev_hash=event.prev_hash, type=event.type, actor=event.actor,
                              subject_type=event.subject_type, subject_id=event.subject_id,
                              run_id=event.run_id, payload=event.payload, created=event.created)
        if expected != event.hash:
            problems.append(f"event {event.id}: stored hash does not match its contents")
        prev = event.hash
    head = AuditHead.objects.filter(pk=1).first()
    if head is not None and head.last_hash != prev:
        problems.append("the chain's head does not match the last event (events removed at the end?)")
    return problems + verify_anchor()


def verify_anchor() -> list[str]:
    """Every (seq, hash) in the anchor file must still be in the database, unchanged."""
    path = anchor_path()
    if not path.exists():
        return []
    anchored = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        parts = line.split()
        if len(parts) != 2 or not parts[0].isascii() or not parts[0].isdigit():
            return [f"anchor {path} line {number} is not 'seq hash'"]
        anchored[int(parts[0])] = parts[1]
    stored = dict(Event.objects.filter(id__in=list(anchored)).values_list("id", "hash"))
    problems = []
    for seq, digest in sorted(anchored.items()):
        if seq not in stored:
            problems.append(f"event {seq}: anchored in {path.name} but missing from the database")
        elif stored[seq] != digest:
            problems.append(f"event {seq}: its hash differs from the one anchored in {path.name} (history rewritten)")
    return problems


def _sqlite_unlocked() -> int:
    return 1 if getattr(_unlocked, "on", False) else 0


def _register_sqlite_function(sender, connection, **kwargs):
    if connection.vendor == "sqlite":
        connection.connection.create_function("ark_audit_unlocked", 0, _sqlite_unlocked, deterministic=False)


def install_connection_hooks():
    connection_created.connect(_register_sqlite_function, dispatch_uid="ark_audit_sqlite_function")


@contextlib.contextmanager
def audit_unlocked():
    """Lift the append-only triggers for this connection: test-database teardown only."""
    _unlocked.on = True
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('ark.audit_unlocked', 'on', false)")
    try:
        yield
    finally:
        _unlocked.on = False
        if connection.vendor == "postgresql" and connection.connection is not None:
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config('ark.audit_unlocked', 'off', false)")
