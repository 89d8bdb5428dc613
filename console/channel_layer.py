"""The channel layer behind live pages: channels_redis with a socket read timeout that outlasts its wait.

channels_redis waits for a message with BZPOPMIN and a server-side timeout of `brpop_timeout` (5 s);
redis-py 8 gives every connection a 5 s socket read timeout by default (it was None before). Both are
5 s, so an idle wait ends on the client side first: "Timeout reading from 127.0.0.1:6379", the consumer
dies and the browser reconnects, about every 6 s. This layer makes each connection's read timeout the
wait plus a margin, so the server always answers first (docs/operations.md).
"""

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
