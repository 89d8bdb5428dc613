"""How both Celery apps talk to the broker (the loop's, from Django settings, and the GPU worker's):
imported by console/settings.py too, so it imports nothing and reads no environment.

- `visibility_timeout` above the longest task (a full evaluation is minutes): a message is re-delivered only
  when its worker died (docs/architecture.md).
- `socket_timeout` and `socket_connect_timeout`: a broker that stops answering without closing the
  connection (a paused or swapping Redis, a failover, a dropped NAT entry) fails a publish after seconds
  instead of holding it forever; kombu's default waits forever. Consumers are unaffected: their BRPOP waits
  1 s at a time, well inside it (docs/reliability.md, "Redis frozen").
"""

BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600, "socket_timeout": 10.0, "socket_connect_timeout": 5.0}
