"""Proposers make candidates for a run: a parameter sweep (Optuna), an LLM, or a person.

Each has `propose(run) -> Candidate | None`; the loop calls `propose_next` when a GPU worker is free.
A proposer never queues anything itself: it submits through loop.services.candidates. The proposers
depend on loop.services.runs, never the reverse.
"""

from __future__ import annotations

import logging

from loop.models import Candidate, Run
from loop.services.runs import proposal_wanted

log = logging.getLogger(__name__)


def proposer_for(run: Run):
    # Local: the sweep loads Optuna and the LLM proposer its client; a run loads only the one it uses.
    from loop.proposers import human, llm, sweep

    return {"sweep": sweep, "llm": llm, "human": human}[run.proposer]


def propose_next(*, run_id: int) -> Candidate | None:
    """Ask the run's proposer for one candidate when a worker slot is free and nothing waits.
    The proposer may take long (an LLM): it runs outside any transaction; submit re-checks."""
    run = Run.objects.select_related("thesis__target", "incumbent").filter(pk=run_id).first()
    if run is None or not proposal_wanted(run):
        return None
    candidate = proposer_for(run).propose(run)
    if candidate is None and not Run.objects.get(pk=run.pk).proposer_settings.get("exhausted"):
        log.info("run %s: the proposer returned nothing", run.pk)
    return candidate
