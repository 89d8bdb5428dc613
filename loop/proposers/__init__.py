"""Proposers make candidates for a run: a parameter sweep (Optuna), an LLM, or a person.

Each has `propose(run) -> Candidate | None`; the loop calls it when a GPU worker is free.
A proposer never queues anything itself: it submits through loop.services.candidates.
"""


def proposer_for(run):
    from loop.proposers import human, llm, sweep

    return {"sweep": sweep, "llm": llm, "human": human}[run.proposer]
