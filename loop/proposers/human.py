"""A person proposes: from the browser (the run page's "Submit a candidate", console/views/submit.py: an
editor that starts from the incumbent's source or an uploaded file, a check that runs the guard before
anything is queued, then the candidate page follows it live) or with
`python manage.py submit_candidate --run N FILE`. The loop never asks a person for more: `propose` has
nothing to offer, and a run whose proposer is `human` waits for people's submissions."""

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
    then ask the run to dispatch it to a free worker. Any running or paused run accepts one, whatever
    its proposer; a paused run dispatches it when resumed. The browser runs the guard first
    (loop/guard_check.py) and submits only a source it passes."""
    check_permission(actor, EDIT_THESIS)
    with transaction.atomic():
        candidate = candidate_submit(run=run, source=source, proposer=PROPOSER, author=actor,
                                     parent=Run.objects.get(pk=run.pk).incumbent,
                                     proposal={"kind": "human", "note": note})
        run_advance_soon(run.pk)
    return candidate
