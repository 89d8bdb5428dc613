"""GPU-side Celery tasks. Thin: they run the pipeline and report to the loop by task name."""

import logging
import os
import socket
import threading
import time

from celery import signals

from gpu_worker.celery_app import BROKER_URL, app, send_to_loop
from gpu_worker.contract import Report, Verdict, to_json
from gpu_worker.hardware import fingerprint
from gpu_worker.pipeline.sandbox import isolation_summary
from gpu_worker.queues import Task, attempt_fence, attempt_key

log = logging.getLogger(__name__)
HEARTBEAT_INTERVAL_S = float(os.environ.get("ARK_HEARTBEAT_INTERVAL_S", "10"))
REPORT_PATIENCE_S = float(os.environ.get("ARK_REPORT_PATIENCE_S", "900"))
# candidate id -> attempt this worker is evaluating now (at most one with --pool=solo)
_running: dict[int, int] = {}


def worker_identity() -> dict:
    fp = fingerprint()  # one nvidia-smi call per heartbeat
    return {
        "name": os.environ.get("ARK_WORKER_NAME") or f"{socket.gethostname()}:{os.getpid()}",
        "hardware": os.environ.get("ARK_HARDWARE") or fp["kind"],
        # the sandbox's state rides in the fingerprint: the dashboard flags a worker that runs candidates unsafely
        "fingerprint": {**fp, "isolation": isolation_summary()},
    }


@app.task(name=Task.GPU_PING)
def ping(ping_id: int) -> None:
    send_to_loop(Task.LOOP_PONG, ping_id, worker_identity())


@app.task(name=Task.GPU_EVALUATE)
def evaluate(spec: dict) -> None:
    # local: the pipeline pulls in torch and the targets, which a worker that only pings never needs
    from gpu_worker.pipeline import evaluate as run_pipeline

    candidate_id, attempt = spec["candidate_id"], spec["attempt"]
    current = _current_attempt(candidate_id)
    if current is not None and current > attempt:
        log.warning("candidate %s: attempt %s superseded by attempt %s, not evaluated", candidate_id, attempt, current)
        return
    identity = worker_identity()

    def on_progress(stage: str, status: str, detail: dict) -> None:
        send_to_loop(Task.LOOP_PROGRESS, candidate_id, attempt, identity["name"], stage, status, detail)

    _running[candidate_id] = attempt  # the heartbeat renews this candidate's lease, and only this one
    try:
        try:
            report = run_pipeline(spec, on_progress=on_progress)
        except Exception as exc:  # the pipeline reports bad candidates itself; this is a harness fault
            log.exception("pipeline failed for candidate %s", candidate_id)
            report = to_json(Report(candidate_id=candidate_id, attempt=attempt, target=spec.get("target"),
                                    verdict=Verdict(status="error", reasons=["harness:exception"],
                                                    message=repr(exc))))
        _send_report(candidate_id, attempt, identity["name"], report)
    finally:
        _running.pop(candidate_id, None)


AVOID_RETRIES = 3  # how often a re-timing goes back to the queue for another worker before this one takes it


@app.task(name=Task.GPU_RETIME, bind=True, max_retries=AVOID_RETRIES)
def retime(self, spec: dict) -> None:
    """The independent re-timing before promotion (docs/isolation.md): fresh sandboxed children, numbers
    back to the loop, which judges them against the report. The worker that made the report passes it back
    to the queue while another was alive, a few times; then it re-times it itself, and the record says so."""
    from gpu_worker.pipeline.retime_run import retime_sandboxed  # local: torch and the targets

    name = worker_identity()["name"]
    if spec.get("avoid_worker") == name and self.request.retries < AVOID_RETRIES:
        raise self.retry(countdown=2)
    try:
        retimed = retime_sandboxed(spec)
    except Exception as exc:  # a harness fault: the loop records the re-timing as unavailable
        log.exception("re-timing of candidate %s failed", spec.get("candidate_id"))
        retimed = {"status": "unavailable", "reason": f"harness error: {exc!r}"[:300], "shapes": [], "findings": []}
    send_to_loop(Task.LOOP_RETIMED, spec["confirmation_id"], name, retimed)


def _current_attempt(candidate_id: int) -> int | None:
    """The attempt the loop last published for this candidate (queues.attempt_key), or None when the broker
    is not Redis, has no such key, or cannot be read (then the evaluation runs: the loop fences reports)."""
    fence = attempt_fence(BROKER_URL)
    if fence is None:
        return None
    try:
        value = fence.get(attempt_key(candidate_id))
        return None if value is None else int(value)
    except Exception:  # an optimisation only
        log.warning("attempt fence of candidate %s not read", candidate_id, exc_info=True)
        return None


def _send_report(candidate_id: int, attempt: int, worker_name: str, report: dict) -> None:
    """A report is minutes of GPU time: hold it through a broker outage (Redis restarting) instead of
    dropping it; past REPORT_PATIENCE_S the loop's reaper re-queues the candidate instead."""
    deadline = time.monotonic() + REPORT_PATIENCE_S
    delay = 0.5
    while True:
        try:
            send_to_loop(Task.LOOP_REPORT, candidate_id, attempt, worker_name, report)
            return
        except Exception as exc:  # kombu's OperationalError and friends: the broker is unreachable
            if time.monotonic() + delay > deadline:
                raise
            log.warning("report for candidate %s not delivered yet (%s); retrying in %.1f s", candidate_id,
                        exc, delay)
            time.sleep(delay)
            delay = min(delay * 2, 5.0)


def _heartbeat_forever(stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            send_to_loop(Task.LOOP_HEARTBEAT, {**worker_identity(), "sent_at": time.time(),
                                               "running": [[c, a] for c, a in list(_running.items())]})
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
