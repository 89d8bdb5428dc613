"""The outbox: a message is published only once its transaction commits, at most once marked sent,
and a broker that refuses it leaves it unsent for the reaper with its failed attempt counted."""

import uuid

import pytest
import redis
from celery import current_app
from django.conf import settings
from django.db import transaction

from gpu_worker.queues import Task, attempt_key
from loop.models import OutboxMessage
from loop.services.outbox import outbox_enqueue, outbox_relay


@pytest.fixture
def broker():
    return redis.Redis.from_url(settings.CELERY_BROKER_URL)


@pytest.fixture
def queue(broker):
    name = f"gpu.outboxtest{uuid.uuid4().hex[:8]}"
    yield name
    broker.delete(name)


def test_a_message_is_published_only_when_its_transaction_commits(transactional_db, broker, queue):
    with transaction.atomic():
        message = outbox_enqueue(task=Task.GPU_PING, queue=queue, args=[1])
        assert broker.llen(queue) == 0  # nothing leaves before the change that needs it is committed
    message.refresh_from_db()
    assert message.sent is not None
    assert broker.llen(queue) == 1


def test_a_message_of_a_rolled_back_transaction_is_never_written_nor_published(transactional_db, broker, queue):
    with pytest.raises(RuntimeError), transaction.atomic():
        outbox_enqueue(task=Task.GPU_PING, queue=queue, args=[1])
        raise RuntimeError("the change fails")
    assert not OutboxMessage.objects.filter(queue=queue).exists()
    assert broker.llen(queue) == 0


@pytest.mark.django_db
def test_relaying_a_sent_message_again_publishes_nothing(broker, queue):
    message = OutboxMessage.objects.create(task=Task.GPU_PING, queue=queue, args=[7])
    assert outbox_relay(ids=[message.id]) == 1
    assert outbox_relay(ids=[message.id]) == 0
    assert outbox_relay(older_than_s=0) == 0
    assert broker.llen(queue) == 1


@pytest.mark.django_db
def test_a_message_younger_than_the_age_asked_for_is_left_to_the_after_commit_relay(broker, queue):
    message = OutboxMessage.objects.create(task=Task.GPU_PING, queue=queue, args=[7])
    assert outbox_relay(older_than_s=3600) == 0
    message.refresh_from_db()
    assert message.sent is None and broker.llen(queue) == 0
    assert outbox_relay(older_than_s=0) == 1
    assert broker.llen(queue) == 1


@pytest.mark.django_db
def test_a_refused_publish_counts_the_attempt_and_leaves_the_message_for_the_reaper(monkeypatch, broker, queue):
    first = OutboxMessage.objects.create(task=Task.GPU_PING, queue=queue, args=[1])
    second = OutboxMessage.objects.create(task=Task.GPU_PING, queue=queue, args=[2])
    published = []

    def send_task(name, args, queue, retry):  # the broker is the edge: it refuses the first message only
        assert retry is False  # one try: the row is the retry
        if args == [1]:
            raise ConnectionError("broker down")
        published.append((name, args, queue))

    monkeypatch.setattr(current_app, "send_task", send_task)
    assert outbox_relay(ids=[first.id, second.id]) == 1  # one refusal does not hold back the rest
    first.refresh_from_db(), second.refresh_from_db()
    assert (first.sent, first.attempts) == (None, 1)
    assert second.sent is not None and second.attempts == 0
    assert published == [(Task.GPU_PING, [2], queue)]
    assert outbox_relay(ids=[first.id]) == 0
    first.refresh_from_db()
    assert first.attempts == 2
    monkeypatch.undo()
    assert outbox_relay(ids=[first.id]) == 1
    assert broker.llen(queue) == 1


@pytest.mark.django_db
def test_an_evaluation_sets_the_attempt_fence_before_it_is_published(broker, queue):
    candidate_id = 900000 + uuid.uuid4().int % 90000
    broker.delete(attempt_key(candidate_id))
    message = OutboxMessage.objects.create(task=Task.GPU_EVALUATE, queue=queue,
                                           args=[{"candidate_id": candidate_id, "attempt": 3}])
    try:
        assert outbox_relay(ids=[message.id]) == 1
        assert int(broker.get(attempt_key(candidate_id))) == 3
        assert broker.ttl(attempt_key(candidate_id)) > 0  # the fence expires; it is not a permanent key
    finally:
        broker.delete(attempt_key(candidate_id))
