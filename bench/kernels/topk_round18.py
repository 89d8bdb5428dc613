"""Round 18: why best_v20 and best_v21 took ~80 us on indexer-shaped logits at 64 x 128K in round 17 where
best_v19 took ~41 us in rounds 13, 14 and 16 (same inputs: gen("indexer", 64, 131072, 100..102)). best_v20
differs from best_v19 only in N and C being unspecialised and KD's CB being 64 instead of C, so two copies of
best_v21 undo one each (_r18_cbC: KD's CB = C again; _r18_spec: every kernel specialised again), and a third
(_r18_info) keeps each call's per-row decision (KD's mode) and per-program candidate counts for a look.
What it found (2026-12-03): best_v19 took ~80 us on these inputs as well, and so did both copies; some rows
of seeds 100 and 102 sent thousands of candidates to one digit and fell to KC's one-program path (round 8 of
gpu_worker/candidates/NOTES.md; best_v22 is the fix).

python bench/kernels/topk_round18.py [--out DIR] [--budget SECONDS] [--run NAME]
(ran at commit 0a8a84b; best_v20.py is gone since: check that commit out to run it again)

The method and the output: topk_sweep.py. The copies are written beside the candidates at run time and
removed at the end.
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

HERE = os.path.join(DB.CAND, "dsa_topk")
SRC = open(os.path.join(HERE, "best_v21.py")).read()
COPIES = {
    "_r18_cbC": [("CB=CB, RT=512 if RC", "CB=C, RT=512 if RC")],
    "_r18_spec": [("@triton.jit(do_not_specialize=NO_SPEC)", "@triton.jit")],
    "_r18_info": [("    return out\n\n\ndef forward(", "    LAST[:] = [info, cnt, RC]\n    return out\n\n\ndef forward("),
                  ("import triton.language as tl\n", "import triton.language as tl\n\nLAST = []\n")],
}
for name, edits in COPIES.items():
    text = SRC
    for a, b in edits:
        assert text.count(a) >= 1, (name, a)
        text = text.replace(a, b)
    with open(os.path.join(HERE, name + ".py"), "w") as f:
        f.write(text)

names = ("best_v19", "best_v20", "best_v21", "_r18_cbC", "_r18_spec")
plan = [("indexer", 64, N, names), ("randn", 64, N, names), ("indexer", 64, N, names)]
try:
    run(18, load=names + ("_r18_info",), checks={"_r18_cbC": [], "_r18_spec": []}, sweep="best_v21",
        sweeps={}, plan=plan, profile=())
    info = DB.load("dsa_topk/_r18_info.py")
    v19 = DB.load("dsa_topk/best_v19.py")
    for seed in (100, 101, 102, 7):
        x, L = gen("indexer", 64, N, seed)
        info.forward(x, L, K)
        torch.cuda.synchronize()
        inf, cnt, rc = info.LAST
        modes = torch.bincount(inf[:, 0].long(), minlength=3).tolist()
        print(f"  indexer seed {seed}: modes {modes}, n_gt per row min/max {int(cnt.sum(1).min())}/"
              f"{int(cnt.sum(1).max())}, largest region {int(cnt.max())} of RC {rc}, members of the k-th digit "
              f"max {int(inf[:, 2].max())}", flush=True)
        if seed == 7:
            for name, m in (("best_v19", v19), ("best_v21", info)):
                DB.guarded("profile", profile_split, name, m.forward, (x, L, K), "indexer M=64")
    DB.RECORDS.append({"kind": "note", "text": "mode counts and splits: see the log"})
finally:
    for name in COPIES:
        os.remove(os.path.join(HERE, name + ".py"))
