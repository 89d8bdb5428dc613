"""The reaper: expired leases are re-queued with a new attempt or failed at the cap; unsent
outbox rows are published."""

from datetime import timedelta

import redis
from django.conf import settings
from django.utils import timezone

from gpu_worker.queues import Task, attempt_key

from loop.models import Candidate, Event, OutboxMessage
from loop.services.candidates import candidate_record_progress
from loop.services.evaluations import candidate_record_report
from loop.services.outbox import outbox_relay
from loop.services.reaper import reap
from loop.services.runs import run_advance
from tests.loop.reports import report
from tests.loop.services.test_report_recording import submit


def expire(candidate):
    Candidate.objects.filter(pk=candidate.pk).update(lease_expires=timezone.now() - timedelta(seconds=1))


def test_a_candidate_whose_worker_went_silent_is_requeued_with_a_new_attempt(make_run, live_worker):
    live_worker()
    run = make_run()
    (candidate,) = submit(run)
    run_advance(run_id=run.pk)
    candidate_record_progress(candidate_id=candidate.pk, attempt=1, worker="gpu-dead", stage="verify", status="start")
    expire(candidate)
    assert reap(outbox_older_than_s=3600)["requeued"] == 1
    candidate.refresh_from_db()
    assert (candidate.status, candidate.attempt) == ("queued", 2)  # the same pass dispatched it again
    specs = [m.args[0] for m in OutboxMessage.objects.filter(task=Task.GPU_EVALUATE).order_by("id")]
    assert [(s["candidate_id"], s["attempt"]) for s in specs] == [(candidate.pk, 1), (candidate.pk, 2)]
    # once published, the attempt fence says 2: a GPU worker given attempt 1 again (re-delivered) skips it
    outbox_relay(older_than_s=0)
    assert int(redis.Redis.from_url(settings.CELERY_BROKER_URL).get(attempt_key(candidate.pk))) == 2
    assert Event.objects.filter(type="candidate.requeued", subject_id=str(candidate.pk)).count() == 1
    # the dead attempt's report, arriving late, changes nothing; the new one is recorded
    assert candidate_record_report(candidate_id=candidate.pk, attempt=1, worker="gpu-dead", report=report()) is None
    assert candidate_record_report(candidate_id=candidate.pk, attempt=2, worker="gpu-2", report=report()) is not None
    assert candidate.evaluations.count() == 1


def test_a_second_reaper_pass_changes_nothing(make_run, live_worker):
    live_worker()
    run = make_run()
    (candidate,) = submit(run)
    run_advance(run_id=run.pk)
    expire(candidate)
    reap(outbox_older_than_s=3600)
    events = Event.objects.count()
    assert reap(outbox_older_than_s=3600) == {"relayed": 0, "requeued": 0, "failed": 0, "advanced": 0}
    assert Event.objects.count() == events


def test_at_the_attempt_cap_the_candidate_ends_in_error(make_run, live_worker):
    live_worker()
    run = make_run(policy={"max_attempts": 2})
    (candidate,) = submit(run)
    for _ in range(2):
        run_advance(run_id=run.pk)
        expire(candidate)
        reap(outbox_older_than_s=3600)
    candidate.refresh_from_db()
    assert (candidate.status, candidate.attempt, candidate.reason_code) == ("error", 2, "error")
    assert "attempt cap is 2" in candidate.reason_text
    assert candidate.decisions.get().actor == "reaper"


def test_a_live_lease_is_left_alone(make_run, live_worker):
    live_worker()
    run = make_run()
    (candidate,) = submit(run)
    run_advance(run_id=run.pk)
    assert reap(outbox_older_than_s=3600)["requeued"] == 0
    assert Candidate.objects.get(pk=candidate.pk).attempt == 1


def test_an_unsent_outbox_row_is_published_by_the_reaper(transactional_db):
    import redis
    from django.conf import settings

    queue = "gpu.reapertest"
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    client.delete(queue)
    message = OutboxMessage.objects.create(task=Task.GPU_EVALUATE, queue=queue, args=[{"candidate_id": 1}])
    assert reap(outbox_older_than_s=0)["relayed"] == 1
    message.refresh_from_db()
    assert message.sent is not None
    assert client.llen(queue) == 1
    client.delete(queue)


def test_a_heartbeat_renews_only_the_leases_of_what_the_worker_says_it_runs(make_run, live_worker):
    from loop.services.candidates import candidate_leases_renew

    live_worker(), live_worker()
    run = make_run()
    first, second = submit(run, 2)
    run_advance(run_id=run.pk)
    for candidate in (first, second):
        candidate_record_progress(candidate_id=candidate.pk, attempt=1, worker="gpu-0", stage="verify",
                                  status="running")
        expire(candidate)
    # a worker restarted under the same name holds only the second one now
    assert candidate_leases_renew(worker="gpu-0", running=[[second.pk, 1]]) == 1
    assert candidate_leases_renew(worker="gpu-0", running=[[first.pk, 0]]) == 0  # an old attempt
    assert reap(outbox_older_than_s=3600)["requeued"] == 1
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, first.attempt) == ("queued", 2) and (second.status, second.attempt) == ("running", 1)
    assert candidate_leases_renew(worker="gpu-0", running=[]) == 0
    assert candidate_leases_renew(worker="gpu-0") == 1  # an older worker without the list: all in its name
