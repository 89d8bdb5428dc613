"""Round 11: best_v17 (best_v16 with programmatic dependent launch between its four kernels, the block scan
chosen by row count) against best_v16, and sweeps.

python bench/kernels/topk_round11.py [--out DIR] [--budget SECONDS] [--run NAME]
(best_v16 was removed after this round; it is in commit 75ecd96.)

The method and the output: topk_sweep.py.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from topk_sweep import N, run

sweeps = {64: [{"PDL": 0}, {"KA_WARPS": 4}],
          4: [{"PDL": 0}, {"SCAN_MAX_ROWS": 0}],
          8: [{"SCAN_MAX_ROWS": 0}],
          16: [{"SCAN_MAX_ROWS": 16}],
          1: [{"PDL": 0}]}
big = ("best_v16", "best_v17")
small = big
plan = [("randn", 64, N, big + ("best",)), ("randn", 4, N, small + ("best",)),
        ("randn", 32, N, big), ("randn", 16, N, small), ("randn", 8, N, small), ("randn", 1, N, small),
        ("randn", 128, N, big), ("indexer", 64, N, big), ("randn", 128, 262144, big),
        ("ties", 64, N, big), ("relu-round", 32, N, big)]

if __name__ == "__main__":
    run(11, load=("best_v16", "best_v17", "best"),
        checks={"best_v17": [{"SMALLR": 8}, {"ALPHA_X2": 0, "BETA": 1}, {"SCAN_MAX_ROWS": 0}, {"SCAN_MAX_ROWS": 64},
                             {"PDL": 0}]},
        sweep="best_v17", sweeps=sweeps, plan=plan, profile=("best_v16", "best_v17"))
