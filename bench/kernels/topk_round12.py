"""Round 12: best_v18 (best_v17 sampling every row longer than its sample) against best_v17 and best_v6 at short
contexts, where best_v17 regressed (1 x 4K: 43.4 us in its evaluation, best_v6 17.9).

python bench/kernels/topk_round12.py [--out DIR]
(best_v18 was removed after this round: it lost; it is in commit 583a0e0.)

Method as dev_bench.py (imported): set-exact checks on the GPU first, then CUDA-graph replays timed one by
one with events, 512 MB L2 flush before each, 3 input sets interleaved, median of 45 replays.
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dev_bench as DB
from topk_round2 import gen

T0 = time.time()
K = 2048


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    a = ap.parse_args()
    DB.CMD = "python bench/kernels/topk_round12.py " + " ".join(sys.argv[1:])
    mods = {n: DB.load(f"dsa_topk/{n}.py") for n in ("best_v6", "best_v17", "best_v18")}

    def chk(m, M, n, kind):
        x, L = DB.topk_inputs(M, n, 1) if kind == "ties" else gen(kind, M, n, 1)
        out = m.forward(x, L, K)
        DB.check_topk_exact(out, x, L, K)
        return True

    cases = [(1, 4096, "ties"), (4, 4096, "randn"), (32, 4096, "ties"), (7, 3000, "ties"), (5, 6000, "ties"),
             (64, 131072, "ties"), (4, 131072, "randn"), (8, 131072, "indexer")]
    ok = all(DB.guarded(f"v18 check {c}", chk, mods["best_v18"], *c) for c in cases)
    DB.RECORDS.append({"kind": "check", "variant": "best_v18", "cases": [list(c) for c in cases], "ok": bool(ok)})
    print(f"[{time.time() - T0:.0f}s] v18 checks: {ok}", flush=True)
    for M, n in [(1, 4096), (4, 4096), (32, 4096), (1, 32768), (4, 131072), (64, 131072)]:
        sets = [gen("randn", M, n, 100 + s) + (K,) for s in range(3)]
        for name, m in mods.items():
            if name == "best_v18" and not ok:
                continue
            st = DB.guarded(f"{name} {M}x{n}", DB.time_graphs, m.forward, sets)
            if st:
                DB.record("dsa_topk", [M, n, K], f"{name} [randn]", {}, st)
    with open(os.path.join(a.out, "kernels-dev-round12-run1.json"), "w") as f:
        json.dump({"records": DB.RECORDS, "fails": DB.FAILS, "gpu": DB.GPU, "elapsed_s": round(time.time() - T0, 1)},
                  f, indent=1)
    print(f"done in {time.time() - T0:.0f}s", flush=True)


if __name__ == "__main__":
    main()
