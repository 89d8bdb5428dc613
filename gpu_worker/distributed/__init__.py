"""Multi-process evaluation (one process per GPU) for targets such as allreduce (issue 9).

runner.evaluate_distributed(spec) -> report; rank.rank_main is each spawned rank; comm.Comm is what
a candidate receives; env.MULTICAST_OFF is forced in every rank. See docs/allreduce.md.
"""

from .env import MULTICAST_OFF, force_multicast_off
from .runner import evaluate_distributed, run_ranks

__all__ = ["MULTICAST_OFF", "evaluate_distributed", "force_multicast_off", "run_ranks"]
