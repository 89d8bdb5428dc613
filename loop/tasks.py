"""Celery tasks on the `loop` queue: thin, id-based, safe to run twice. Names from gpu_worker.queues."""

from celery import shared_task

from gpu_worker.queues import Task
from loop.models import Run
from loop.proposers import propose_next as proposer_propose_next
from loop.services import wiring
from loop.services.candidates import candidate_leases_renew, candidate_record_progress
from loop.services.confirmations import confirmation_record
from loop.services.evaluations import candidate_record_report
from loop.services.reaper import reap
from loop.services.runs import run_advance


@shared_task(name=Task.LOOP_PONG)
def pong(ping_id: int, worker: dict) -> None:
    wiring.ping_record_pong(ping_id=ping_id, worker=worker)


@shared_task(name=Task.LOOP_HEARTBEAT)
def heartbeat(beat: dict) -> None:
    worker, came_alive = wiring.worker_heartbeat_record(beat=beat)
    candidate_leases_renew(worker=worker.name, running=beat.get("running"))
    if came_alive:  # new capacity: the runs on its hardware may dispatch to it
        for run_id in Run.objects.filter(status=Run.Status.RUNNING, hardware=worker.hardware).values_list("id", flat=True):
            run_advance(run_id=run_id)


@shared_task(name=Task.LOOP_PROGRESS)
def progress(candidate_id: int, attempt: int, worker_name: str, stage: str, status: str, detail: dict) -> None:
    candidate_record_progress(candidate_id=candidate_id, attempt=attempt, worker=worker_name, stage=stage,
                              status=status, detail=detail)


@shared_task(name=Task.LOOP_REPORT)
def report(candidate_id: int, attempt: int, worker_name: str, report: dict) -> None:
    evaluation = candidate_record_report(candidate_id=candidate_id, attempt=attempt, worker=worker_name, report=report)
    if evaluation is not None:
        run_advance(run_id=evaluation.candidate.run_id)


@shared_task(name=Task.LOOP_RETIMED)
def retimed(confirmation_id: int, worker_name: str, retimed: dict) -> None:
    confirmation_record(confirmation_id=confirmation_id, worker=worker_name, retimed=retimed)


@shared_task(name=Task.LOOP_ADVANCE)
def advance_run(run_id: int) -> None:
    run_advance(run_id=run_id)


@shared_task(name=Task.LOOP_PROPOSE)
def propose_next(run_id: int) -> None:
    proposer_propose_next(run_id=run_id)
    run_advance(run_id=run_id)


@shared_task(name=Task.LOOP_REAP)
def reaper() -> None:
    reap()
