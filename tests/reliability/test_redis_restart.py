"""Redis stopped and restarted in the middle of a run (a private redis-server without persistence:
every queued and unacknowledged message is gone when it comes back). The workers reconnect and keep
consuming, the run resumes and finishes, and no candidate, dispatch or report is lost: the GPU
worker holds its report until the broker is back, the outbox and the reaper repair the rest."""

import re

from loop.models import Candidate, Evaluation, Event
from tests.conftest import wait_until
from tests.reliability.conftest import assert_run_consistent, live_children, wait_finished


def test_redis_restart_mid_run_loses_nothing(own_redis, publish_to, start_loop_worker, start_gpu_worker, human_run):
    env = {"REDIS_URL": own_redis.url, "CELERY_BROKER_URL": own_redis.url}
    publish_to(own_redis.url)
    # A lease longer than the outage: the candidate in flight is not given up while its worker holds the
    # report (an outage longer than the lease costs a re-evaluation instead; docs/reliability.md).
    loop = start_loop_worker(**env, ARK_LEASE_S="120")
    gpu = start_gpu_worker(**env)
    run = human_run(3)

    # Stop Redis while a candidate is in its sandbox, and keep it down until the child has finished:
    # the worker then has a report and no broker to send it to.
    victim = wait_until(lambda: Candidate.objects.filter(run=run, stage="verify:running").first(), timeout_s=120,
                        interval_s=0.05)
    own_redis.stop()
    wait_until(lambda: not live_children(start_gpu_worker.scratch), timeout_s=120)
    # ...and until the worker tried to send its report (and failed, or is holding it for a retry).
    wait_until(lambda: re.search(r"gpu\.evaluate\[\S+\] raised|report for candidate \d+ not delivered yet",
                                 gpu.output()), timeout_s=60)
    evaluations_during_outage = Evaluation.objects.filter(candidate__run=run).count()
    own_redis.start()

    finished = wait_finished(run, timeout_s=300)
    candidates = assert_run_consistent(finished, expect_candidates=3)
    # Both workers survived the outage and kept consuming: the same processes did the rest of the run.
    assert loop.popen.poll() is None and gpu.popen.poll() is None
    after = Evaluation.objects.filter(candidate__run=run).exclude(candidate=victim)
    assert after.count() >= 1 and evaluations_during_outage <= 1
    # The report held through the outage was delivered: the victim was decided on its first attempt.
    victim.refresh_from_db()
    assert (victim.attempt, list(victim.evaluations.values_list("attempt", flat=True))) == (1, [1]), \
        (victim.attempt, Event.objects.filter(subject_id=str(victim.pk)).values_list("type", flat=True))
    assert all(c.status == "reverted" for c in candidates)
