"""The wiring, end to end with real parts: loop -> Redis -> GPU worker -> Redis -> loop worker ->
database -> channel layer (channels-redis) -> a websocket consumer."""

import asyncio

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator

from console.asgi import application
from loop.models import Event, Ping, Worker
from loop.services import wiring
from tests.conftest import wait_until

ORIGIN = (b"origin", b"http://127.0.0.1")
HOST = (b"host", b"127.0.0.1")  # the socket must be same-origin: scheme, host and port (console/origin.py)


def test_a_ping_goes_to_the_gpu_queue_and_its_answer_reaches_the_browser_group(
        alice, loop_worker, gpu_worker, gpu_hardware):
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)("events", channel)

    # A ping goes only to registered hardware: this test's kind is registered by the worker's first heartbeat.
    wait_until(lambda: Worker.objects.filter(hardware=gpu_hardware).exists(), timeout_s=60)
    ping = wiring.ping_send(actor=alice, hardware=gpu_hardware)

    answered = wait_until(lambda: Ping.objects.filter(id=ping.id, answered__isnull=False).first(), timeout_s=60)
    assert answered.worker.startswith("")
    assert answered.fingerprint["kind"] in ("cpu", answered.fingerprint.get("kind"))
    pushed = []
    while not pushed or pushed[-1]["event"] != "ping.answered":
        pushed.append(async_to_sync(asyncio.wait_for)(layer.receive(channel), timeout=30))
    message = pushed[-1]
    assert message["subject_id"] == str(ping.id)
    assert message["seq"] == Event.objects.get(type="ping.answered", subject_id=str(ping.id)).id
    assert [m["event"] for m in pushed if m["event"].startswith("ping")] == ["ping.sent", "ping.answered"]


def test_the_gpu_worker_reports_its_hardware_by_heartbeat(loop_worker, gpu_worker, gpu_hardware):
    worker = wait_until(lambda: Worker.objects.filter(hardware=gpu_hardware).first(), timeout_s=60)
    assert worker.fingerprint["kind"] == "cpu"
    assert Event.objects.filter(type="worker.joined", subject_id=str(worker.pk)).count() == 1


@pytest.mark.django_db(transaction=True)
async def test_a_consumer_receives_group_messages_through_redis(alice):
    communicator = WebsocketCommunicator(application, "/ws/events/", headers=[ORIGIN, HOST])
    communicator.scope["user"] = alice
    connected, _ = await communicator.connect()
    assert connected
    newest = await database_sync_to_async(lambda: Event.objects.order_by("-id").values_list("id", flat=True).first() or 0)()
    assert await communicator.receive_json_from(timeout=5) == {"joined": "events", "seq": newest}
    await get_channel_layer().group_send("events", {"type": "ark.event", "seq": 7, "event": "x.y"})
    assert await communicator.receive_json_from(timeout=5) == {"seq": 7, "event": "x.y"}
    await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_the_websocket_refuses_anonymous_users():
    communicator = WebsocketCommunicator(application, "/ws/events/", headers=[ORIGIN, HOST])
    connected, code = await communicator.connect()
    assert not connected


@pytest.mark.django_db(transaction=True)
async def test_the_websocket_refuses_foreign_origins(alice):
    communicator = WebsocketCommunicator(application, "/ws/events/", headers=[(b"origin", b"http://evil.example"), HOST])
    communicator.scope["user"] = alice
    connected, _ = await communicator.connect()
    assert not connected
