"""A socket's consumer ends when the browser goes, also where redis-py lost the cancellation of its wait.

A refused socket (a foreign origin) or one closed right after it opened is cancelled while channels_redis is
still starting its first wait on Redis; redis-py can swallow that cancellation (redis/redis-py#2028), and
channels_redis's receive then waits again, forever: the consumer never ended (a probe: 18 of 20 refused sockets
were still running 10 s after their disconnect, and ended only when force-cancelled). Nothing in the consumer's own
stack cancels it again: a server that does not kept each such task, and a page of foreign-origin sockets could
pile them up (what the served console's server does with them was not measured).
console.channel_layer raises the swallowed cancellation when the wait returns (at most the layer's wait)."""

import asyncio

import pytest
from channels.testing import WebsocketCommunicator

from console.asgi import application
from tests.conftest import tasks_left

FOREIGN = [(b"origin", b"http://evil.example"), (b"host", b"127.0.0.1")]
WAIT_S = 1.0  # the layer's server-side wait: a lost cancellation surfaces within it


@pytest.fixture
def short_wait(settings):
    layers = {name: {**conf, "CONFIG": {**conf["CONFIG"], "brpop_timeout": WAIT_S}}
              for name, conf in settings.CHANNEL_LAYERS.items()}
    settings.CHANNEL_LAYERS = layers


@pytest.mark.django_db(transaction=True)
async def test_refused_sockets_end_on_their_own_when_the_browser_goes(alice, short_wait):
    ended_in, sockets = [], []
    for _ in range(6):
        socket = WebsocketCommunicator(application, "/ws/events/", headers=FOREIGN)
        socket.scope["user"] = alice
        sockets.append(socket)
        connected, _ = await socket.connect()
        assert not connected
        await socket.send_input({"type": "websocket.disconnect", "code": 1001})
        loop = asyncio.get_running_loop()
        started = loop.time()
        done, _ = await asyncio.wait([socket.future], timeout=WAIT_S + 4)
        ended_in.append(round(loop.time() - started, 2) if done else None)
        if not done:  # leave nothing running for the next test before failing
            socket.future.cancel()
            await asyncio.wait([socket.future], timeout=WAIT_S + 4)
    assert None not in ended_in, f"consumers still running {WAIT_S + 4} s after their disconnect: {ended_in}"
    assert not any(s.future.cancelled() for s in sockets)  # each ended on its own, none was cancelled for it
    assert tasks_left() == []
