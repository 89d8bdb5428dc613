"""Round 13: best_v19 (best_v17 with KB's slots taken per warp by a ballot in inline PTX, and rows of at most
SMALL values read whole by KA for a near-exact threshold) against best_v17, and best_v6 at short contexts.

python bench/kernels/topk_round13.py [--out DIR] [--budget SECONDS] [--run NAME]

The method and the output: topk_sweep.py.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import topk_sweep
from topk_sweep import N, run

# short rows and a ReLU row on top of the driver's correctness cases
topk_sweep.FULL += [(4, 4096, "randn"), (32, 8192, "ties"), (2, 3000, "relu-round"), (1, 2049, "randn"),
                    (16, 16384, "randn")]
sweeps = {64: [{"BLOCK": 2048}, {"num_warps": 8}, {"TARGET_CTAS": 2048}, {"PF": 0}],
          4: [{"WARP": 0}, {"SCAN_MAX_ROWS": 0}]}
pair = ("best_v17", "best_v19")
short = ("best_v6", "best_v17", "best_v19")
plan = [("randn", 64, N, pair), ("randn", 4, N, pair), ("randn", 128, N, pair), ("randn", 1, N, pair),
        ("randn", 16, N, pair), ("indexer", 64, N, pair), ("randn", 128, 262144, pair), ("ties", 64, N, pair),
        ("randn", 1, 4096, short), ("randn", 4, 4096, short), ("randn", 32, 4096, short),
        ("randn", 1, 8192, short), ("randn", 4, 8192, short), ("randn", 1, 16384, short),
        ("randn", 4, 16384, short), ("randn", 1, 32768, short), ("relu-round", 32, N, pair)]

if __name__ == "__main__":
    run(13, load=("best_v6", "best_v17", "best_v19"),
        checks={"best_v19": [{"WARP": 0}, {"SCAN_MAX_ROWS": 0}, {"SMALLR": 8}, {"ALPHA_X2": 0, "BETA": 1}]},
        sweep="best_v19", sweeps=sweeps, plan=plan, profile=("best_v17", "best_v19"))
