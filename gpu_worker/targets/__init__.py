"""Registry of targets: the operations a candidate may speed up (docs/harness.md, What the harness is given)."""

from .add_rmsnorm import TARGET as ADD_RMSNORM
from .base import Shape, TargetSpec
from .dsa_indexer_topk import TARGET as DSA_INDEXER_TOPK
from .dsa_indexer_topk_fp8 import TARGET as DSA_INDEXER_TOPK_FP8
from .dsa_topk import TARGET as DSA_TOPK

TARGETS: dict[str, TargetSpec] = {t.name: t for t in (DSA_TOPK, DSA_INDEXER_TOPK, DSA_INDEXER_TOPK_FP8, ADD_RMSNORM)}


def get_target(name: str, document: dict | None = None) -> TargetSpec:
    """A built-in target by name, or the target an imported FlashInfer-Bench document describes."""
    if document is not None:
        from ..fib.target import target_from_document  # needs the `fib` extra; only imported targets do

        target = target_from_document(document, builtins=TARGETS)
        if target.name != name:
            raise KeyError(f"the spec names target {name!r} but its document defines {target.name!r}")
        return target
    try:
        return TARGETS[name]
    except KeyError:
        raise KeyError(f"unknown target {name!r}; known: {', '.join(sorted(TARGETS))}") from None


__all__ = ["TARGETS", "Shape", "TargetSpec", "get_target"]
