"""A broker that stops answering without closing its connections (a paused Redis: SIGSTOP). A publish
fails after the broker's socket timeout instead of holding the caller (a web request that committed a run,
the reaper) forever; the outbox row stays unsent and goes out once the broker answers again
(gpu_worker/broker.py, docs/reliability.md)."""

import os
import signal
import threading

from gpu_worker.broker import BROKER_TRANSPORT_OPTIONS
from gpu_worker.queues import Task
from loop.models import OutboxMessage
from loop.services.outbox import outbox_relay


def _message(n: int) -> OutboxMessage:
    return OutboxMessage.objects.create(task=Task.LOOP_PONG, queue="frozen-test", args=[n])


def test_a_publish_to_a_paused_broker_fails_in_bounded_time_and_the_outbox_sends_it_later(
        transactional_db, own_redis, publish_to):
    publish_to(own_redis.url)
    assert outbox_relay(ids=[_message(1).id]) == 1  # the connection is open and in the pool
    held = _message(2)
    outcome = {}
    relay = threading.Thread(target=lambda: outcome.update(sent=outbox_relay(ids=[held.id])), daemon=True)
    os.kill(own_redis.proc.popen.pid, signal.SIGSTOP)
    try:
        relay.start()
        # kombu's default socket timeout (None) held it here for good; the options allow one try of 10 s
        relay.join(6 * BROKER_TRANSPORT_OPTIONS["socket_timeout"])
        assert not relay.is_alive(), "the publish to a paused broker never returned"
    finally:
        os.kill(own_redis.proc.popen.pid, signal.SIGCONT)
    held.refresh_from_db()
    assert outcome == {"sent": 0} and held.sent is None and held.attempts == 1
    assert outbox_relay(ids=[held.id]) == 1
    held.refresh_from_db()
    assert held.sent is not None
