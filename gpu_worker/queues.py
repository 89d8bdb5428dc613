"""Queue and task names: the only place they are spelled.

The loop side and the GPU side share nothing but these names and JSON messages.
"""

import os
from enum import StrEnum
from functools import lru_cache

# One Redis can serve several ark deployments (or test runs) when each names its own loop queue.
LOOP_QUEUE = os.environ.get("ARK_LOOP_QUEUE", "loop")


def gpu_queue(hardware: str) -> str:
    return f"gpu.{hardware}"


# The attempt fence in the broker's Redis: the loop sets it to the attempt it publishes an evaluation for;
# a GPU worker that receives an older attempt (a message re-delivered after its worker died, when the loop
# has re-queued the candidate since) skips it instead of spending an evaluation on a report the loop would
# ignore. Only an optimisation: the loop's own fence on reports is what keeps results right.
ATTEMPT_TTL_S = 7 * 86400


def attempt_key(candidate_id: int) -> str:
    return f"ark:{LOOP_QUEUE}:attempt:{int(candidate_id)}"


@lru_cache(maxsize=4)
def attempt_fence(broker_url: str):
    """The Redis client that holds the fence on this broker (one per URL, it connects on first use), or
    None when the broker is not Redis."""
    if not broker_url.startswith(("redis://", "rediss://", "unix://")):
        return None
    # local: this module is imported by both halves and the CLI; only a Redis broker needs the client
    import redis

    return redis.Redis.from_url(broker_url, socket_timeout=2)


class Task(StrEnum):
    """Every task name on the wire. `GPU_*` run on a GPU worker (queue `gpu_queue(hardware)`), `LOOP_*` on
    the loop's worker (queue LOOP_QUEUE); the prefix is the side that consumes it."""

    GPU_PING = "gpu.ping"
    GPU_EVALUATE = "gpu.evaluate"
    GPU_RETIME = "gpu.retime"
    LOOP_PONG = "loop.pong"
    LOOP_HEARTBEAT = "loop.heartbeat"
    LOOP_PROGRESS = "loop.progress"
    LOOP_REPORT = "loop.report"
    LOOP_RETIMED = "loop.retimed"
    LOOP_ADVANCE = "loop.advance_run"
    LOOP_PROPOSE = "loop.propose_next"
    LOOP_REAP = "loop.reap"
