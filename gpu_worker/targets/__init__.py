"""Registry of targets: the operations a candidate may speed up (docs/harness.md, What the harness is given)."""

from .add_rmsnorm import TARGET as ADD_RMSNORM
from .base import Shape, TargetSpec
from .dsa_indexer_topk import TARGET as DSA_INDEXER_TOPK
from .dsa_indexer_topk_fp8 import TARGET as DSA_INDEXER_TOPK_FP8
from .dsa_topk import TARGET as DSA_TOPK

TARGETS: dict[str, TargetSpec] = {t.name: t for t in (DSA_TOPK, DSA_INDEXER_TOPK, DSA_INDEXER_TOPK_FP8, ADD_RMSNORM)}


def get_target(name: str) -> TargetSpec:
    try:
        return TARGETS[name]
    except KeyError:
        raise KeyError(f"unknown target {name!r}; known: {', '.join(sorted(TARGETS))}") from None


__all__ = ["TARGETS", "Shape", "TargetSpec", "get_target"]
