"""Round 17: best_v21 (KA's threshold without the scratch round trip when the sample is no larger than the
scratch tile) against best_v20 (round 8's compile-count change, the proof's best.py), small sweeps of
KA's, KD's and KC's warps and the sample slack at 64 rows, and the per-kernel split.

python bench/kernels/topk_round17.py [--out DIR] [--budget SECONDS] [--run NAME]
(ran at commit af6d1ef; best_v20.py is gone since, its source is kept as
bench/results/h200/logs/proof-2026-12-03e/dsa_topk__best.py: check that commit out to run it again)

The method and the output: topk_sweep.py.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import topk_sweep
from topk_sweep import N, run

topk_sweep.FULL += [(4, 4096, "randn"), (32, 8192, "ties"), (2, 3000, "relu-round"), (1, 2049, "randn"),
                    (16, 16384, "randn"), (8, 4096, "ties"), (3, 4096, "relu-sparse"), (128, 4096, "ties")]
sweeps = {64: [{"KA_WARPS": 4}, {"KD_WARPS": 8}, {"KD_WARPS": 2}, {"SEL_WARPS": 8}, {"BETA": 8}],
          128: [{"KA_WARPS": 4}]}
both = ("best_v20", "best_v21")
plan = [("randn", 64, N, both), ("randn", 4, N, both), ("randn", 128, N, both), ("randn", 128, 262144, both),
        ("randn", 1, 4096, both), ("indexer", 64, N, both), ("randn", 64, N, both)]

if __name__ == "__main__":
    run(17, load=both,
        checks={"best_v21": [{"KA_WARPS": 4}, {"BETA": 8}, {"SMALLR": 8}, {"ALPHA_X2": 0, "BETA": 1}]},
        sweep="best_v21", sweeps=sweeps, plan=plan, profile=("best_v21",))
