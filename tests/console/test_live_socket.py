"""The websocket behind live pages: it refuses anonymous users, first says the newest event of its group (a page
rendered before that event re-reads itself), then pushes each committed event with its sequence number (pages
then re-read themselves over HTTP)."""

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from console.asgi import application
from loop.models import Event
from loop.selectors import last_seq
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


async def _socket(user, path: str) -> WebsocketCommunicator:
    client = Client()
    await sync_to_async(client.force_login)(user)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    communicator = WebsocketCommunicator(application, path, headers=[ORIGIN, HOST, (b"cookie", cookie)])
    connected, _ = await communicator.connect()
    assert connected
    return communicator


async def test_the_socket_refuses_an_anonymous_user():
    communicator = WebsocketCommunicator(application, "/ws/events/", headers=[ORIGIN, HOST])
    connected, _ = await communicator.connect(timeout=10)
    assert not connected


async def test_a_run_page_socket_gets_the_events_of_its_run_with_sequence_numbers(alice, bob):
    run = await sync_to_async(builders.make_run)(alice)
    communicator = await _socket(bob, f"/ws/runs/{run.pk}/")
    newest = await sync_to_async(lambda: Event.objects.filter(run_id=run.pk).latest("id").id)()
    assert await communicator.receive_json_from(timeout=10) == {"joined": f"run-{run.pk}", "seq": newest}
    candidate = await sync_to_async(builders.submit)(run, tag="ws")
    message = await communicator.receive_json_from(timeout=10)
    assert message["event"] == "candidate.proposed" and message["subject_id"] == str(candidate.pk)
    assert isinstance(message["seq"], int) and message["run_id"] == run.pk
    await communicator.disconnect()


async def test_a_socket_that_joins_after_an_event_says_it_is_newer_than_the_page(alice, bob):
    """The page is rendered (its data-last-seq), an event is published to no socket yet, then the socket joins:
    its first message names that event, so live.js knows the page is older and re-reads it."""
    run = await sync_to_async(builders.make_run)(alice)
    rendered = await sync_to_async(last_seq)()
    candidate = await sync_to_async(builders.submit)(run, tag="before-join")
    proposed = await sync_to_async(Event.objects.get)(type="candidate.proposed", subject_id=str(candidate.pk))
    assert proposed.id > rendered

    on_run = await _socket(bob, f"/ws/runs/{run.pk}/")
    assert await on_run.receive_json_from(timeout=10) == {"joined": f"run-{run.pk}", "seq": proposed.id}
    everywhere = await _socket(bob, "/ws/events/")  # every page's socket: the newest event of all (a login, here)
    assert await everywhere.receive_json_from(timeout=10) == {"joined": "events", "seq": await sync_to_async(last_seq)()}
    await on_run.disconnect()
    await everywhere.disconnect()


async def test_a_run_socket_names_the_newest_event_of_its_own_run(alice, bob):
    """Another run's later event does not make a run page look older than it is."""
    quiet = await sync_to_async(builders.make_run)(alice)
    quiet_newest = await sync_to_async(lambda: Event.objects.filter(run_id=quiet.pk).latest("id").id)()
    busy = await sync_to_async(builders.make_run)(alice)
    await sync_to_async(builders.submit)(busy, tag="elsewhere")
    assert await sync_to_async(last_seq)() > quiet_newest

    communicator = await _socket(bob, f"/ws/runs/{quiet.pk}/")
    assert await communicator.receive_json_from(timeout=10) == {"joined": f"run-{quiet.pk}", "seq": quiet_newest}
    await communicator.disconnect()


async def test_an_event_reaches_its_socket_without_a_hop_to_the_database_thread(alice, bob, monkeypatch):
    """Channels' dispatch closes stale database connections on a thread before every handler: once per event
    per socket, for a handler that reads no database. The consumer forwards events without it."""
    import channels.consumer

    hops = []

    async def counted():
        hops.append(1)

    monkeypatch.setattr(channels.consumer, "aclose_old_connections", counted)
    run = await sync_to_async(builders.make_run)(alice)
    communicator = await _socket(bob, f"/ws/runs/{run.pk}/")
    await communicator.receive_json_from(timeout=10)
    hops.clear()  # the connect went through Channels' dispatch, as it should
    await sync_to_async(builders.submit)(run, tag="hop")
    assert (await communicator.receive_json_from(timeout=10))["event"] == "candidate.proposed"
    assert hops == []
    await communicator.disconnect()
