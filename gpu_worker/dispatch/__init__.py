"""Serving-config dispatch: pick a kernel per call by the workload axis (n_ctx)."""

from gpu_worker.dispatch.default import default_topk
from gpu_worker.dispatch.dispatcher import Dispatcher, Kernel, routed_config, single_kernel_config
from gpu_worker.dispatch.loader import (
    CandidateLoadError,
    load_candidate_module,
    source_hash,
    triton_kernel_names,
)
from gpu_worker.serving_config import RouteTable, ServingConfigError, parse_serving_config

__all__ = [
    "CandidateLoadError",
    "Dispatcher",
    "Kernel",
    "RouteTable",
    "ServingConfigError",
    "default_topk",
    "load_candidate_module",
    "parse_serving_config",
    "routed_config",
    "single_kernel_config",
    "source_hash",
    "triton_kernel_names",
]
