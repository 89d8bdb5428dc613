"""Queue and task names: the only place they are spelled.

The loop side and the GPU side share nothing but these names and JSON messages.
"""

import os
from enum import StrEnum

# One Redis can serve several ark deployments (or test runs) when each names its own loop queue.
LOOP_QUEUE = os.environ.get("ARK_LOOP_QUEUE", "loop")


def gpu_queue(hardware: str) -> str:
    return f"gpu.{hardware}"


class Task(StrEnum):
    GPU_PING = "gpu.ping"
    GPU_EVALUATE = "gpu.evaluate"
    LOOP_PONG = "loop.pong"
    LOOP_HEARTBEAT = "loop.heartbeat"
    LOOP_PROGRESS = "loop.progress"
    LOOP_REPORT = "loop.report"
