"""The verify-and-benchmark pipeline: `evaluate(spec) -> report` (docs/harness.md, docs/contract.md)."""

from ..contract import SCHEMA, EvaluationSpec, to_json
from ..targets.allreduce import MULTI_PROCESS_TARGETS
from .evaluate import Evaluation


def evaluate(spec: EvaluationSpec | dict, *, on_progress=None) -> dict:
    """Evaluate one candidate with the pipeline its target needs; the report as JSON-ready data."""
    spec = EvaluationSpec.from_dict(spec)
    if spec.target in MULTI_PROCESS_TARGETS:
        # local: the runner extends Evaluation, so importing it here at load time would be circular
        from ..distributed.runner import DistributedEvaluation

        return to_json(DistributedEvaluation(spec, on_progress=on_progress).run())
    return to_json(Evaluation(spec, on_progress=on_progress).run())


__all__ = ["SCHEMA", "Evaluation", "evaluate"]
