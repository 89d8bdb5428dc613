"""The e2e ceiling of a kernel slot: the same decode step with that kernel replaced by a fixed answer.

The decode step is deterministic over static caches (every replay writes the same new token and reads the
same cache), so the slot's correct output for each layer is known once the default step has run. A
`FixedAnswer` returns those tensors, already on the device, in layer order: inside a CUDA graph the slot
then costs nothing and the rest of the step (the copy of its output included) is unchanged, so the step
time is the floor any kernel in that slot can reach. The answer is computed once, before capture and
outside the timed region, from the default kernel's own step (docs/kernels.md, "The e2e ceiling").
"""

from __future__ import annotations

import torch


class FixedAnswer:
    """A zero-cost stand-in for a slot: call i of a step returns answers[i % layers]."""

    def __init__(self, answers: torch.Tensor):
        self.answers = answers  # [layers, ...] the slot's output per layer, on the model's device
        self.layers = answers.shape[0]
        self.calls = 0

    def __call__(self, *args, **kwargs) -> torch.Tensor:
        answer = self.answers[self.calls % self.layers]
        self.calls += 1
        return answer


# slot (the target the e2e step dispatches) -> the name of its output in a step snapshot: the top-k's positions,
# the FP8 indexer's global token ids
SLOT_OUTPUT = {"dsa_topk": "indices", "dsa_indexer_topk_fp8": "slot_out"}


def fixed_answer_for(target: str, default_snapshot: dict) -> FixedAnswer:
    """The ceiling stand-in for `target`'s slot, from the default kernel's step outputs."""
    return FixedAnswer(default_snapshot[SLOT_OUTPUT[target]].clone())


def ceiling_summary(default_tok_s, candidate_tok_s, ceiling_tok_s) -> dict:
    """'Attained x of a possible y': y = ceiling / default tokens/s (what a free kernel would give),
    x = candidate / ceiling tokens/s; gain_attained = the share of the possible gain the candidate took."""
    if not (default_tok_s and candidate_tok_s and ceiling_tok_s):
        return {"ceiling_ratio": None, "ceiling_attained": None, "gain_attained": None}
    possible = ceiling_tok_s / default_tok_s
    gain = (candidate_tok_s - default_tok_s) / (ceiling_tok_s - default_tok_s) if possible != 1 else None
    return {"ceiling_ratio": possible, "ceiling_attained": candidate_tok_s / ceiling_tok_s, "gain_attained": gain}
