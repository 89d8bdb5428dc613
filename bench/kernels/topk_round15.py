"""Round 15: best_v19 with short rows (at most SMALL values) selected whole by KA (an exact radix select; KB, KD
and KC skip the row) against best_v6 at short contexts (round 14: 4 x 4K 31.6 against 26.4 us, 8 x 4K ties 104
against 27), and sweeps of the sample size (NS = 64), the prefetch depth and KA's warps at 128K.

python bench/kernels/topk_round15.py [--out DIR] [--budget SECONDS] [--run NAME]
(ran at commit 33e3556; best_v19 has no SHORT or FCMP parameter since: check that commit out to run it again)

The method and the output: topk_sweep.py.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import topk_sweep
from topk_sweep import N, run

topk_sweep.FULL += [(4, 4096, "randn"), (32, 8192, "ties"), (2, 3000, "relu-round"), (1, 2049, "randn"),
                    (16, 16384, "randn"), (8, 4096, "ties"), (3, 4096, "relu-sparse"), (128, 4096, "ties")]
sweeps = {64: [{"NS": 64}, {"PF": 2}, {"PF": 2, "NS": 64}, {"KA_WARPS": 4}],
          4: [{"NS": 64}, {"PF": 2}]}
one = ("best_v19",)
short = ("best_v6", "best_v19")
plan = [("randn", 64, N, one), ("randn", 4, N, one), ("randn", 128, N, one), ("randn", 128, 262144, one),
        ("randn", 1, 4096, short), ("randn", 4, 4096, short), ("randn", 32, 4096, short),
        ("randn", 128, 4096, short), ("ties", 8, 4096, short), ("randn", 1, 8192, short),
        ("ties", 64, N, one)]

if __name__ == "__main__":
    run(15, load=("best_v6", "best_v19"),
        checks={"best_v19": [{"NS": 64}, {"PF": 2}, {"SMALLR": 8}, {"ALPHA_X2": 0, "BETA": 1}]},
        sweep="best_v19", sweeps=sweeps, plan=plan, profile=("best_v19",))
