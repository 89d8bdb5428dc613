"""Round 8: 16-byte loads in the filter (best_v13), the row histogram by atomics and suffix tables for KD
(best_v14), and best_v6 with 16-byte loads (best_v6b) for the small-M path.

python bench/kernels/topk_round8.py [--out DIR] [--budget SECONDS] [--run NAME]
(best_v13..best_v16 and best_v6b were removed after round 11, once best_v17 carried their changes;
they are in commit 75ecd96.)

The method and the output: topk_sweep.py.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from topk_sweep import N, run

sweeps = {64: [{"BLOCK": 2048}, {"num_warps": 8}, {"NS": 128}, {"TARGET_CTAS": 2048}, {"KD_WARPS": 2},
               {"BLOCK": 2048, "num_warps": 8}],
          4: [{"BLOCK": 2048, "ATOMIC": 0}, {"NS": 128}, {"KD_WARPS": 2}, {"MIN_C": 8}]}
big = ("best_v12", "best_v13", "best_v14")
small = ("best_v6", "best_v6b", "best_v14")
plan = [("randn", 64, N, big + ("best_v6b", "best")), ("randn", 4, N, small + ("best_v13", "best")),
        ("randn", 32, N, big + ("best_v6b",)), ("randn", 16, N, small), ("randn", 1, N, small),
        ("randn", 128, N, big), ("indexer", 64, N, big), ("randn", 128, 262144, big),
        ("ties", 64, N, big), ("relu-round", 32, N, big)]

if __name__ == "__main__":
    run(8, load=("best_v12", "best_v13", "best_v14", "best_v6", "best_v6b", "best"),
        checks={"best_v13": [], "best_v14": [{"SMALLR": 8}, {"ALPHA_X2": 0, "BETA": 1}, {"ATOMIC": 0, "BLOCK": 2048}],
                "best_v6b": []},
        sweep="best_v14", sweeps=sweeps, plan=plan, profile=("best_v12", "best_v13", "best_v14", "best_v6", "best_v6b"))
