"""Runs that say why they wait: a run's hardware with no live GPU worker, from the heartbeat data, and the
hardware kind a new thesis defaults to (what the live workers report). Reads only (docs/domain.md, Workers).
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db.models import Count, Max
from django.utils import timezone

from loop.models import Run, Worker

FALLBACK_HARDWARE = "h200"
VOWEL_SOUNDING = "aefhilmnorsx"  # letters read with a vowel first: "an h200", "an mi300", "a b200"


def _deadline():
    return timezone.now() - timedelta(seconds=settings.ARK_HEARTBEAT_TIMEOUT_S)


def hardware_waiting(hardware: str) -> dict | None:
    """None when a worker of this hardware kind is live; else {"text", "last_seen"}: "waiting for an h200
    worker; none seen since <time>" or "...; none has ever sent a heartbeat"."""
    last = Worker.objects.filter(hardware=hardware).aggregate(last=Max("last_heartbeat"))["last"]
    return _waiting(hardware, last, _deadline())


def _waiting(hardware: str, last, deadline) -> dict | None:
    """What hardware_waiting says, given the newest heartbeat of the kind (None: never)."""
    if last is not None and last >= deadline:
        return None
    article = "an" if hardware[:1].lower() in VOWEL_SOUNDING else "a"
    if last is None:
        return {"text": f"waiting for {article} {hardware} worker; none has ever sent a heartbeat", "last_seen": None}
    return {"text": f"waiting for {article} {hardware} worker; none seen since "
                    f"{timezone.localtime(last):%Y-%m-%d %H:%M:%S %Z}", "last_seen": last}


def run_waiting(run: Run) -> dict | None:
    """Why an active run is not moving: no live worker of its hardware. None for a finished run."""
    if run.status not in (Run.Status.RUNNING, Run.Status.PAUSED) or run.imported_from:
        return None
    return hardware_waiting(run.hardware)


def runs_waiting(runs) -> dict[int, dict]:
    """{run pk: waiting} for the active runs among `runs`, one query for all their hardware kinds."""
    kinds = {run.hardware for run in runs}
    last = dict(Worker.objects.filter(hardware__in=kinds).order_by().values_list("hardware")
                .annotate(last=Max("last_heartbeat")))
    deadline = _deadline()
    waiting = {}
    for run in runs:
        if run.status not in (Run.Status.RUNNING, Run.Status.PAUSED) or run.imported_from:
            continue
        found = _waiting(run.hardware, last.get(run.hardware), deadline)
        if found is not None:
            waiting[run.pk] = found
    return waiting


def live_hardware_default() -> str:
    """The hardware kind most live workers report, for a new thesis; h200 when none is live."""
    row = (Worker.objects.filter(last_heartbeat__gte=_deadline()).values("hardware").annotate(n=Count("id"))
           .order_by("-n", "hardware").first())
    return row["hardware"] if row else FALLBACK_HARDWARE
