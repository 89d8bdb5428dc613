"""Run top-k variants once each between cudaProfilerStart/Stop, for Nsight Compute's per-kernel figures.

ncu --profile-from-start off --clock-control none --csv --metrics ... python bench/kernels/ncu_topk.py [VARIANT:M ...]
(default: best_v12 and best_v17 at M = 64 and 4; round 8 ran v12, v13, v14 at 64 and 4,
and v6 and v6b at 4, from commit 75ecd96). Prints the order of the (variant, M) pairs profiled; each forward launches its kernels in a fixed order.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dev_bench as DB
from topk_round2 import gen

K, N = 2048, 131072
PLAN = [(v, M) for M in (64, 4) for v in ("best_v12", "best_v17")]
if sys.argv[1:]:
    PLAN = [(a.split(":")[0], int(a.split(":")[1])) for a in sys.argv[1:]]
mods = {v: DB.load(f"dsa_topk/{v}.py") for v, _ in PLAN}
inputs = {M: gen("randn", M, N, 7) for M in {m for _, m in PLAN}}
for v, M in PLAN:                       # compile and warm outside the profiled range
    mods[v].forward(*inputs[M], K)
torch.cuda.synchronize()
torch.cuda.profiler.start()
for v, M in PLAN:
    mods[v].forward(*inputs[M], K)
    torch.cuda.synchronize()
torch.cuda.profiler.stop()
print("ORDER", PLAN, flush=True)
