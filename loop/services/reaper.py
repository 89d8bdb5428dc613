"""The reaper: one periodic pass that repairs what a crash can leave behind.

- outbox rows never published (a crash between commit and publish) are published;
- candidates whose lease expired (their worker stopped sending heartbeats, or nobody started
  them) go back to `proposed` for a new attempt, or end as `error` at the run's attempt cap;
- every running run is advanced (stop rules, dispatch to free workers, proposals).
Safe to run concurrently with itself and with the tasks: every change is conditional.
"""

from __future__ import annotations

import logging

from django.utils import timezone

from loop.models import Candidate, Run
from loop.policy import RunPolicy
from loop.services.candidates import IN_FLIGHT, candidate_requeue_or_fail
from loop.services.outbox import outbox_relay
from loop.services.runs import run_advance

log = logging.getLogger(__name__)


def reap(*, outbox_older_than_s: float = 5.0) -> dict:
    relayed = outbox_relay(older_than_s=outbox_older_than_s)
    requeued = failed = 0
    expired = (Candidate.objects.filter(status__in=IN_FLIGHT, lease_expires__lt=timezone.now())
               .select_related("run").order_by("id"))
    for candidate in expired:
        why = (f"worker {candidate.worker} stopped sending heartbeats" if candidate.status == Candidate.Status.RUNNING
               else "no worker started it in time")
        result = candidate_requeue_or_fail(candidate=candidate, why=why,
                                           max_attempts=RunPolicy.from_json(candidate.run.policy).max_attempts)
        requeued += result == "requeued"
        failed += result == "failed"
    advanced = 0
    for run_id in Run.objects.filter(status=Run.Status.RUNNING).values_list("id", flat=True):
        run_advance(run_id=run_id)
        advanced += 1
    if relayed or requeued or failed:
        log.info("reaper: %s relayed, %s requeued, %s failed", relayed, requeued, failed)
    return {"relayed": relayed, "requeued": requeued, "failed": failed, "advanced": advanced}
