"""Round 10: best_v16 (best_v15 without the per-element count of keys == thr, region pointers hoisted, NS 128, a
block scan for programs of at most two blocks, KA's warps a parameter) against best_v15, and sweeps.

python bench/kernels/topk_round10.py [--out DIR] [--budget SECONDS] [--run NAME]
(best_v13..best_v16 and best_v6b were removed after round 11, once best_v17 carried their changes;
they are in commit 75ecd96.)

The method and the output: topk_sweep.py.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from topk_sweep import N, run

sweeps = {64: [{"KA_WARPS": 4}, {"PF": 0}, {"NS": 256}, {"BLOCK": 2048, "num_warps": 8}, {"SEL_WARPS": 8}],
          4: [{"SCAN_MAX_BLOCKS": 0}, {"KA_WARPS": 4}, {"NS": 256}, {"BLOCK": 2048}],
          16: [{"SCAN_MAX_BLOCKS": 0}, {"KA_WARPS": 4}],
          32: [{"SCAN_MAX_BLOCKS": 4}, {"KA_WARPS": 4}],
          1: [{"SCAN_MAX_BLOCKS": 0}, {"KA_WARPS": 4}]}
big = ("best_v15", "best_v16")
small = big
plan = [("randn", 64, N, big + ("best",)), ("randn", 4, N, small + ("best",)),
        ("randn", 32, N, big), ("randn", 16, N, small), ("randn", 1, N, small),
        ("randn", 128, N, big), ("indexer", 64, N, big), ("randn", 128, 262144, big),
        ("ties", 64, N, big), ("relu-round", 32, N, big)]

if __name__ == "__main__":
    run(10, load=("best_v15", "best_v16", "best"),
        checks={"best_v16": [{"SMALLR": 8}, {"ALPHA_X2": 0, "BETA": 1}, {"SCAN_MAX_BLOCKS": 0}, {"SCAN_MAX_BLOCKS": 8},
                             {"KA_WARPS": 4}]},
        sweep="best_v16", sweeps=sweeps, plan=plan, profile=("best_v15", "best_v16"))
