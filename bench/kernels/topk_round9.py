"""Round 9: best_v15 (best_v14 with the next block's load issued before this block's slots are taken) and sweeps.

python bench/kernels/topk_round9.py [--out DIR] [--budget SECONDS] [--run NAME]
(best_v13..best_v16 and best_v6b were removed after round 11, once best_v17 carried their changes;
they are in commit 75ecd96.)

The method and the output: topk_sweep.py.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from topk_sweep import N, run

sweeps = {64: [{"ATOMIC": 0}, {"NS": 128}, {"ATOMIC": 0, "NS": 128}, {"BLOCK": 2048}, {"BLOCK": 2048, "ATOMIC": 0},
               {"BLOCK": 512}, {"num_warps": 8}, {"TARGET_CTAS": 2048}, {"TARGET_CTAS": 512}],
          4: [{"ATOMIC": 0}, {"NS": 128}, {"BLOCK": 2048, "ATOMIC": 0}, {"BLOCK": 2048, "ATOMIC": 0, "NS": 128},
              {"NS": 128, "ATOMIC": 0}, {"MAX_C": 32}]}
big = ("best_v14", "best_v15")
small = big
plan = [("randn", 64, N, big + ("best",)), ("randn", 4, N, small + ("best",)),
        ("randn", 32, N, big), ("randn", 16, N, small), ("randn", 1, N, small),
        ("randn", 128, N, big), ("indexer", 64, N, big), ("randn", 128, 262144, big),
        ("ties", 64, N, big), ("relu-round", 32, N, big)]

if __name__ == "__main__":
    run(9, load=("best_v14", "best_v15", "best"),
        checks={"best_v15": [{"SMALLR": 8}, {"ALPHA_X2": 0, "BETA": 1}, {"ATOMIC": 0}]},
        sweep="best_v15", sweeps=sweeps, plan=plan, profile=("best_v14", "best_v15"))
