"""The verify-and-benchmark pipeline: `evaluate(spec) -> report` (docs/harness.md)."""

from .evaluate import SCHEMA, evaluate

__all__ = ["SCHEMA", "evaluate"]
