"""Round 14: best_v19 with KD's region loads issued right after its wait (KD_EARLY) and KD's tile the region size
(RT = RC: rows of 4K values were left to KC's one-program path in round 13), against its own parameters
(PF = 2: two blocks in flight in KB; KD_EARLY = 0), and best_v6 at short contexts.

python bench/kernels/topk_round14.py [--out DIR] [--budget SECONDS] [--run NAME]

The method and the output: topk_sweep.py.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import topk_sweep
from topk_sweep import N, run

topk_sweep.FULL += [(4, 4096, "randn"), (32, 8192, "ties"), (2, 3000, "relu-round"), (1, 2049, "randn"),
                    (16, 16384, "randn"), (8, 4096, "ties")]
sweeps = {64: [{"PF": 2}, {"KD_EARLY": 0}, {"PF": 2, "KD_WARPS": 8}],
          4: [{"PF": 2}, {"KD_EARLY": 0}],
          128: [{"PF": 2}]}
one = ("best_v19",)
short = ("best_v6", "best_v19")
plan = [("randn", 64, N, one), ("randn", 4, N, one), ("randn", 128, N, one), ("indexer", 64, N, one),
        ("randn", 128, 262144, one),
        ("randn", 1, 4096, short), ("randn", 4, 4096, short), ("randn", 32, 4096, short),
        ("randn", 128, 4096, short), ("randn", 4, 8192, short), ("ties", 8, 4096, short)]

if __name__ == "__main__":
    run(14, load=("best_v6", "best_v19"),
        checks={"best_v19": [{"PF": 2}, {"KD_EARLY": 0}, {"SMALLR": 8}, {"ALPHA_X2": 0, "BETA": 1}]},
        sweep="best_v19", sweeps=sweeps, plan=plan, profile=("best_v19",))
