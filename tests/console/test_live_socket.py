"""The websocket behind live pages: it refuses anonymous users and pushes each committed event with its
sequence number (pages then re-read themselves over HTTP)."""

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from console.asgi import application
from tests.console import builders

pytestmark = pytest.mark.django_db(transaction=True)
ORIGIN = (b"origin", b"http://127.0.0.1")
HOST = (b"host", b"127.0.0.1")  # the socket must be same-origin: scheme, host and port (console/origin.py)


@pytest.fixture(autouse=True)
def _held_tasks(monkeypatch):
    """run_start publishes to the loop queue after commit; no loop worker is part of this test, and a
    message left in the shared broker would reach the next run's loop worker."""
    from loop.services import outbox

    class Held:
        def send_task(self, *args, **kwargs):
            pass

    monkeypatch.setattr(outbox, "current_app", Held())


async def test_the_socket_refuses_an_anonymous_user():
    communicator = WebsocketCommunicator(application, "/ws/events/", headers=[ORIGIN, HOST])
    connected, _ = await communicator.connect()
    assert not connected


async def test_a_run_page_socket_gets_the_events_of_its_run_with_sequence_numbers(alice, bob):
    client = Client()
    await sync_to_async(client.force_login)(bob)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    run = await sync_to_async(builders.make_run)(alice)
    communicator = WebsocketCommunicator(application, f"/ws/runs/{run.pk}/", headers=[ORIGIN, HOST, (b"cookie", cookie)])
    connected, _ = await communicator.connect()
    assert connected
    candidate = await sync_to_async(builders.submit)(run, tag="ws")
    message = await communicator.receive_json_from(timeout=10)
    assert message["event"] == "candidate.proposed" and message["subject_id"] == str(candidate.pk)
    assert isinstance(message["seq"], int) and message["run_id"] == run.pk
    await communicator.disconnect()
