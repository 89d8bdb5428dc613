"""Round 16: best_v19 with KB comparing raw floats against a float threshold in its PTX (FCMP = 1: no key per
value, keys only for the candidates), against FCMP = 0, the sample of 64 groups with two blocks in flight, and
short rows: KA's exact select (SHORT = 1) against its near-exact threshold (SHORT = 0) and best_v6.

python bench/kernels/topk_round16.py [--out DIR] [--budget SECONDS] [--run NAME]
(ran at commit 5960fc1; best_v19 has no SHORT or FCMP parameter since: check that commit out to run it again)

The method and the output: topk_sweep.py.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import topk_sweep
from topk_sweep import N, run

topk_sweep.FULL += [(4, 4096, "randn"), (32, 8192, "ties"), (2, 3000, "relu-round"), (1, 2049, "randn"),
                    (16, 16384, "randn"), (8, 4096, "ties"), (3, 4096, "relu-sparse"), (128, 4096, "ties")]
sweeps = {64: [{"FCMP": 0}, {"PF": 2, "NS": 64}, {"PF": 2, "NS": 64, "FCMP": 0}, {"NS": 64}, {"PF": 2}],
          4: [{"FCMP": 0}, {"NS": 64}, {"PF": 2, "NS": 64}],
          128: [{"FCMP": 0}, {"PF": 2, "NS": 64}],
          ("randn", 1, 4096): [{"SHORT": 0}], ("randn", 4, 4096): [{"SHORT": 0}],
          ("ties", 8, 4096): [{"SHORT": 0}]}
one = ("best_v19",)
short = ("best_v6", "best_v19")
plan = [("randn", 64, N, one), ("randn", 4, N, one), ("randn", 128, N, one), ("randn", 128, 262144, one),
        ("indexer", 64, N, one), ("randn", 1, N, one),
        ("randn", 1, 4096, short), ("randn", 4, 4096, short), ("ties", 8, 4096, short)]

if __name__ == "__main__":
    run(16, load=("best_v6", "best_v19"),
        checks={"best_v19": [{"FCMP": 0}, {"PF": 2, "NS": 64}, {"SMALLR": 8}, {"ALPHA_X2": 0, "BETA": 1}]},
        sweep="best_v19", sweeps=sweeps, plan=plan, profile=("best_v19",))
    # per-kernel split of a short row (printed to the log only)
    import dev_bench as DB
    from topk_round2 import gen
    from topk_round4 import profile_split
    m = DB.load("dsa_topk/best_v19.py")
    for kind, M in (("randn", 1), ("ties", 8)):
        x, L = gen("randn", M, 4096, 7) if kind == "randn" else DB.topk_inputs(M, 4096, 7)
        for short in (1, 0):
            m.PARAMS["SHORT"] = short
            profile_split(f"best_v19 SHORT={short}", m.forward, (x, L, 2048), f"{kind} {M}x4096")
