"""A person proposes: a source file submitted with `python manage.py submit_candidate --run N FILE`.
The loop never asks a person for more."""

from __future__ import annotations

from django.db import transaction

from loop.models import Candidate, Run
from loop.roles import EDIT_THESIS, check_permission
from loop.services.candidates import candidate_submit
from loop.services.runs import run_advance_soon

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
        run_advance_soon(run.pk)
    return candidate
