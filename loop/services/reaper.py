"""The reaper: one periodic pass that repairs what a crash can leave behind.

- outbox rows never published (a crash between commit and publish) are published;
- candidates whose lease expired (their worker stopped sending heartbeats, or nobody started
  them) go back to `proposed` for a new attempt, or end as `error` at the run's attempt cap;
- a running run is advanced where the pass requeued or failed one of its candidates, and where it
  has nothing proposed or in flight (its last proposal failed, or a trigger was lost): the reaper is
  the retry of last resort, not a second clock.
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
    touched = set()
    expired = (Candidate.objects.filter(status__in=IN_FLIGHT, lease_expires__lt=timezone.now())
               .select_related("run").order_by("id"))
    for candidate in expired:
        why = (f"worker {candidate.worker} stopped sending heartbeats" if candidate.status == Candidate.Status.RUNNING
               else "no worker started it in time")
        result = candidate_requeue_or_fail(candidate=candidate, why=why,
                                           max_attempts=RunPolicy.from_json(candidate.run.policy).max_attempts)
        requeued += result == "requeued"
        failed += result == "failed"
        if result:
            touched.add(candidate.run_id)
    running = Run.objects.filter(status=Run.Status.RUNNING)
    # Stalled: nothing of the run is on a worker. Proposed candidates waiting for a dispatch count as stalled
    # too: the advance that would have sent them can die with a loop worker (killed after its commit).
    # Advancing is idempotent, so advancing a run that did not need it changes nothing.
    stalled = running.exclude(candidates__status__in=IN_FLIGHT).values_list("id", flat=True)
    to_advance = set(running.filter(id__in=touched).values_list("id", flat=True)) | set(stalled)
    for run_id in sorted(to_advance):
        run_advance(run_id=run_id)
    advanced = len(to_advance)
    if relayed or requeued or failed:
        log.info("reaper: %s relayed, %s requeued, %s failed", relayed, requeued, failed)
    return {"relayed": relayed, "requeued": requeued, "failed": failed, "advanced": advanced}
