"""The GPU worker's Celery app: consumes `gpu.<hardware>`, answers on `loop`.

Run one per GPU with `--pool=solo` (CUDA cannot be used in a forked child):
    python -m gpu_worker worker --hardware h200
"""

import os

from celery import Celery

from gpu_worker.broker import BROKER_TRANSPORT_OPTIONS
from gpu_worker.queues import LOOP_QUEUE

BROKER_URL = os.environ.get("CELERY_BROKER_URL") or os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")

app = Celery("ark-gpu", broker=BROKER_URL, include=["gpu_worker.tasks"])
app.conf.update(
    task_ignore_result=True,
    worker_prefetch_multiplier=1,
    # An evaluation that dies with its worker is re-delivered; the loop fences it by attempt.
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    broker_connection_retry_on_startup=True,
    broker_transport_options=BROKER_TRANSPORT_OPTIONS,
    task_default_queue=LOOP_QUEUE,
    worker_hijack_root_logger=False,
)


def send_to_loop(task_name: str, *args) -> None:
    app.send_task(task_name, args=list(args), queue=LOOP_QUEUE)
