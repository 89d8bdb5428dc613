"""The e2e gate: a DeepSeek-V3.2-shaped decode step, one CUDA graph, top-k through dispatch."""

from gpu_worker.e2e.gate import run_gate

__all__ = ["run_gate"]
