"""The verify-and-benchmark pipeline: `evaluate(spec) -> report` (see NOTES-harness.md)."""

from .evaluate import SCHEMA, evaluate

__all__ = ["SCHEMA", "evaluate"]
