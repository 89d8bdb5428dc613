"""Round 19: best_v22 (digits linear in the value) against best_v21 (digits linear in the key). Round 18
found that indexer-shaped logits put some rows' k-th value near zero, where a key-linear digit held
thousands of candidates (up to 4696 in one digit; KD's mode 2 takes at most SMALLR = 512), so those rows
fell to KC's one-program path: ~80 us instead of ~40 at 64 x 128K whenever an input set held such a row.
Also each call's per-row decisions (KD's mode) for best_v22 on the same inputs.

python bench/kernels/topk_round19.py [--out DIR] [--budget SECONDS] [--run NAME]

The method and the output: topk_sweep.py. The copy for the decisions is written beside the candidates at run
time and removed at the end.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dev_bench as DB
import topk_sweep
from topk_round2 import gen
from topk_round4 import profile_split
from topk_sweep import K, N, run

topk_sweep.FULL += [(4, 4096, "randn"), (32, 8192, "ties"), (2, 3000, "relu-round"), (1, 2049, "randn"),
                    (16, 16384, "randn"), (8, 4096, "ties"), (3, 4096, "relu-sparse"), (128, 4096, "ties"),
                    (64, N, "indexer")]
HERE = os.path.join(DB.CAND, "dsa_topk")
SRC = open(os.path.join(HERE, "best_v22.py")).read()
INFO = SRC.replace("    return out\n\n\ndef forward(", "    LAST[:] = [info, cnt, RC]\n    return out\n\n\ndef forward(")
INFO = INFO.replace("import triton.language as tl\n", "import triton.language as tl\n\nLAST = []\n", 1)
assert "LAST[:]" in INFO
with open(os.path.join(HERE, "_r19_info.py"), "w") as f:
    f.write(INFO)

names = ("best_v21", "best_v22")
plan = [("indexer", 64, N, names), ("randn", 64, N, names), ("randn", 4, N, names), ("randn", 128, N, names),
        ("randn", 128, 262144, names), ("randn", 1, 4096, names), ("relu-round", 32, N, names),
        ("indexer", 64, N, names), ("randn", 64, N, names)]
try:
    run(19, load=names, checks={"best_v22": [{"SMALLR": 8}, {"ALPHA_X2": 0, "BETA": 1}, {"SPAN_BITS": 8}]},
        sweep="best_v22", sweeps={}, plan=plan, profile=("best_v22",))
    info = DB.load("dsa_topk/_r19_info.py")
    for seed in (100, 101, 102, 7):
        x, L = gen("indexer", 64, N, seed)
        info.forward(x, L, K)
        torch.cuda.synchronize()
        inf, cnt, rc = info.LAST
        modes = torch.bincount(inf[:, 0].long(), minlength=3).tolist()
        print(f"  best_v22 indexer seed {seed}: modes {modes}, n_gt per row min/max {int(cnt.sum(1).min())}/"
              f"{int(cnt.sum(1).max())}, largest region {int(cnt.max())} of RC {rc}, members of the k-th digit "
              f"max {int(inf[:, 2].max())}", flush=True)
        if seed == 100:
            DB.guarded("profile", profile_split, "best_v22", info.forward, (x, L, K), "indexer M=64 seed 100")
finally:
    os.remove(os.path.join(HERE, "_r19_info.py"))
