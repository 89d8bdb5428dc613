"""The channel layer behind live pages: channels_redis with a socket read timeout that outlasts its wait.

channels_redis waits for a message with BZPOPMIN and a server-side timeout of `brpop_timeout` (5 s);
redis-py 8 gives every connection a 5 s socket read timeout by default (it was None before). Both are
5 s, so an idle wait ends on the client side first: "Timeout reading from 127.0.0.1:6379", the consumer
dies and the browser reconnects, about every 6 s. This layer makes each connection's read timeout the
wait plus a margin, so the server always answers first (docs/operations.md).

It also ends a receive that was cancelled while redis-py lost the cancellation (redis/redis-py#2028): a socket
refused or closed as its consumer started its first wait kept that consumer waiting again and again, forever
(tests/console/test_closed_socket.py). Such a task still counts the cancellation (`Task.cancelling()`), so
each wait's return checks it: the consumer ends within one wait.
"""

import asyncio

from channels_redis.core import RedisChannelLayer as _RedisChannelLayer

# Beyond the server-side wait: the reply's trip back and a busy event loop.
READ_MARGIN_S = 10.0


def read_timeout(brpop_timeout: float, configured: float | None) -> float:
    """The socket read timeout a connection needs: at least the wait plus the margin."""
    floor = brpop_timeout + READ_MARGIN_S
    return floor if configured is None else max(configured, floor)


class RedisChannelLayer(_RedisChannelLayer):
    def __init__(self, *args, brpop_timeout: float = _RedisChannelLayer.brpop_timeout, **kwargs):
        super().__init__(*args, **kwargs)
        self.brpop_timeout = brpop_timeout
        for host in self.hosts:
            host["socket_timeout"] = read_timeout(brpop_timeout, host.get("socket_timeout"))

    async def _brpop_with_clean(self, index, channel, timeout):
        """One wait for a message. A cancellation that redis-py swallowed during it is raised when it returns;
        a message it took stays in channels_redis's backup queue and goes back to the channel on the next
        receive, so nothing is lost."""
        member = await super()._brpop_with_clean(index, channel, timeout)
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise asyncio.CancelledError
        return member
