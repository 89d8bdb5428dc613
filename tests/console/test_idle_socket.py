"""Idle live sockets stay up: the channel layer's socket read timeout outlasts its blocking wait.

The pinned libraries both wait 5 s (channels_redis's BZPOPMIN, redis-py 8's socket read timeout), so an
idle receive timed out on the client side. The same cause shows at a 1 s scale here, which keeps the
suite fast: with equal timeouts the receive fails, with console.channel_layer it waits through many
rounds and still gets the next message."""

import asyncio
import time

import pytest
import redis
from channels_redis.core import RedisChannelLayer as PlainLayer
from django.conf import settings

from console.channel_layer import READ_MARGIN_S, RedisChannelLayer, read_timeout


def _url() -> str:
    return settings.REDIS_URL


async def test_equal_wait_and_read_timeouts_drop_an_idle_receive():
    layer = PlainLayer(hosts=[{"address": _url(), "socket_timeout": 1.0}], prefix="ark-test-idle")
    layer.brpop_timeout = 1.0
    channel = await layer.new_channel()
    started = time.monotonic()
    try:
        with pytest.raises(redis.exceptions.TimeoutError, match="Timeout reading"):
            await asyncio.wait_for(layer.receive(channel), timeout=10)
        assert time.monotonic() - started < 5
    finally:
        await layer.flush()


async def test_the_console_layer_waits_through_idle_rounds_and_still_delivers():
    layer = RedisChannelLayer(hosts=[_url()], prefix="ark-test-idle", brpop_timeout=0.5)
    assert layer.hosts[0]["socket_timeout"] == 0.5 + READ_MARGIN_S
    channel = await layer.new_channel()
    receiving = asyncio.ensure_future(layer.receive(channel))
    try:
        await asyncio.sleep(3.2)  # six empty waits of 0.5 s on the server, each answered in time
        assert not receiving.done(), receiving.exception() if receiving.done() else None
        await layer.send(channel, {"type": "ark.event", "seq": 1})
        assert (await asyncio.wait_for(receiving, timeout=5))["seq"] == 1
    finally:
        receiving.cancel()
        await layer.flush()


def test_the_settings_layer_reads_longer_than_it_waits():
    config = settings.CHANNEL_LAYERS["default"]
    assert config["BACKEND"] == "console.channel_layer.RedisChannelLayer"
    layer = RedisChannelLayer(**config["CONFIG"])
    assert layer.hosts[0]["socket_timeout"] > layer.brpop_timeout
    # a longer configured read timeout is kept; a shorter one is raised to the floor
    assert read_timeout(5.0, 60.0) == 60.0 and read_timeout(5.0, 5.0) == 5.0 + READ_MARGIN_S
