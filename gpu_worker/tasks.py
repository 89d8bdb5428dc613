"""GPU-side Celery tasks. Thin: they run the pipeline and report to the loop by task name."""

import logging
import os
import socket
import threading
import time

from celery import signals

from gpu_worker.celery_app import app, send_to_loop
from gpu_worker.hardware import fingerprint
from gpu_worker.queues import Task

log = logging.getLogger(__name__)
HEARTBEAT_INTERVAL_S = float(os.environ.get("ARK_HEARTBEAT_INTERVAL_S", "10"))


def worker_identity() -> dict:
    hardware = os.environ.get("ARK_HARDWARE") or fingerprint()["kind"]
    return {
        "name": os.environ.get("ARK_WORKER_NAME") or f"{socket.gethostname()}:{os.getpid()}",
        "hardware": hardware,
        "fingerprint": fingerprint(),
    }


@app.task(name=Task.GPU_PING)
def ping(ping_id: int) -> None:
    send_to_loop(Task.LOOP_PONG, ping_id, worker_identity())


@app.task(name=Task.GPU_EVALUATE)
def evaluate(spec: dict) -> None:
    from gpu_worker.pipeline import evaluate as run_pipeline

    identity = worker_identity()
    candidate_id, attempt = spec["candidate_id"], spec["attempt"]

    def on_progress(stage: str, status: str, detail: dict) -> None:
        send_to_loop(Task.LOOP_PROGRESS, candidate_id, attempt, identity["name"], stage, status, detail)

    try:
        report = run_pipeline(spec, on_progress=on_progress)
    except Exception as exc:  # the pipeline reports bad candidates itself; this is a harness fault
        log.exception("pipeline failed for candidate %s", candidate_id)
        report = {
            "schema": "ark.report/1", "candidate_id": candidate_id, "attempt": attempt,
            "target": spec.get("target"), "stages": {},
            "verdict": {"status": "error", "reasons": ["error:harness"], "message": repr(exc)},
        }
    send_to_loop(Task.LOOP_REPORT, candidate_id, attempt, identity["name"], report)


def _heartbeat_forever(stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            send_to_loop(Task.LOOP_HEARTBEAT, {**worker_identity(), "sent_at": time.time()})
        except Exception:  # the broker may be down; the next beat retries
            log.warning("heartbeat not sent", exc_info=True)
        stop.wait(HEARTBEAT_INTERVAL_S)


_stop_heartbeat = threading.Event()


@signals.worker_ready.connect
def _start_heartbeat(**_):
    threading.Thread(target=_heartbeat_forever, args=(_stop_heartbeat,), daemon=True, name="ark-heartbeat").start()


@signals.worker_shutdown.connect
def _stop(**_):
    _stop_heartbeat.set()
