"""A person proposes: a source file submitted in the console or with
`python manage.py submit_candidate --run N FILE`. The loop never asks a person for more."""

from __future__ import annotations

from django.db import transaction

from gpu_worker.queues import LOOP_QUEUE
from loop.models import Candidate, Run
from loop.roles import EDIT_THESIS, check_permission
from loop.services.candidates import candidate_submit
from loop.services.outbox import outbox_enqueue
from loop.services.runs import ADVANCE_TASK

PROPOSER = "human"


def propose(run: Run) -> Candidate | None:
    return None


def candidate_submit_human(*, run: Run, actor, source: str, note: str = "") -> Candidate:
    """Check and record a person's source (CandidateRejected lists what is wrong; nothing queued),
    then let the run dispatch it to a free worker. Any run accepts one, whatever its proposer."""
    check_permission(actor, EDIT_THESIS)
    with transaction.atomic():
        candidate = candidate_submit(run=run, source=source, proposer=PROPOSER, author=actor,
                                     parent=Run.objects.get(pk=run.pk).incumbent,
                                     proposal={"kind": "human", "note": note})
        outbox_enqueue(task=ADVANCE_TASK, queue=LOOP_QUEUE, args=[run.pk])
    return candidate
