"""Round 7: best_v12 (KC's common cases spread over a new (M, C) kernel KD; KB sweeps) against best_v10 and best.

python bench/kernels/topk_round7.py [--out DIR] [--budget SECONDS] [--run NAME]
(best_v10.py was removed after run 1, once best_v12 carried its kernels; it is in commit 974ca8e.)

Method as dev_bench.py (imported): correctness on the GPU first (set-exact, deterministic as a set, input
not mutated) for every parameter set before it is timed, then CUDA-graph replays timed one by one with
events, 512 MB L2 flush before each, 3 input sets interleaved, median of 45 replays. Then KB sweeps (block
size, warps, atomics or a block scan, the digit histogram from registers), the Triton read floor at larger
blocks, and a per-kernel split (torch.profiler, eager).
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
from topk_round4 import profile_split, read_floor

T0 = time.time()
K = 2048
N = 131072
RUN = "run1"


def save(out_dir):
    with open(os.path.join(out_dir, f"kernels-dev-round7-{RUN}.json"), "w") as f:
        json.dump({"records": DB.RECORDS, "fails": DB.FAILS, "gpu": DB.GPU, "clocks_end": DB.clocks(),
                   "elapsed_s": round(time.time() - T0, 1)}, f, indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--budget", type=float, default=240.0)
    ap.add_argument("--run", default="run1", help="suffix of the output file")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    global RUN
    RUN = a.run
    DB.CMD = "python bench/kernels/topk_round7.py " + " ".join(sys.argv[1:])
    late = lambda: time.time() - T0 > a.budget
    print("clocks start:", DB.clocks(), flush=True)
    v12 = DB.load("dsa_topk/best_v12.py")
    v10 = DB.load("dsa_topk/best_v10.py")
    best = DB.load("dsa_topk/best.py")
    base = dict(v12.PARAMS)

    def use(over=None):
        v12.PARAMS.clear(); v12.PARAMS.update(base); v12.PARAMS.update(over or {})

    def chk(M, n, kind, seed=1):
        if kind == "ties":
            x, L = DB.topk_inputs(M, n, seed)
        else:
            x, L = gen(kind, M, n, seed)
            L[0] = n - 5
        xc = x.clone()
        out = v12.forward(x, L, K)
        torch.cuda.synchronize()
        assert torch.equal(x, xc), "input mutated"
        DB.check_topk_exact(out, x, L, K)
        assert torch.equal(out.sort(1).values, v12.forward(x, L, K).sort(1).values), "not deterministic as a set"
        return True

    def checked(over, cases):
        use(over)
        ok = all(DB.guarded(f"v12 check {c} {over}", chk, *c) for c in cases)
        DB.RECORDS.append({"target": "dsa_topk", "kind": "check", "variant": "v12", "params": over,
                           "cases": [list(c) for c in cases], "ok": bool(ok)})
        print(f"  check v12 {over}: {'ok' if ok else 'FAIL'}", flush=True)
        use()
        return ok

    full = [(64, N, "ties"), (4, N, "ties"), (32, N, "ties"), (1, N, "ties"), (3, 5000, "ties"),
            (128, 262144, "ties"), (33, 65537, "ties"), (7, 4099, "ties"), (5, 1000, "ties"),
            (32, N, "relu-sparse"), (32, N, "relu-round"), (8, N, "indexer"), (64, N, "randn")]
    bad = not checked({}, full)
    for over in ({"SMALLR": 8}, {"ALPHA_X2": 0, "BETA": 1}, {"HREG": 1}):
        bad |= not checked(over, [(16, N, "ties"), (16, N, "randn"), (32, N, "relu-round")])
    print(f"[{time.time() - T0:.0f}s] checks done; v12 failing: {bad}", flush=True)
    save(a.out)

    def time_it(label, m, M, n, kind, sets, over=None):
        if m is v12:
            use(over)
        st = DB.guarded(f"{label} {kind} {over}", DB.time_graphs, m.forward, sets)
        if st:
            DB.record("dsa_topk", [M, n, K], f"{label} [{kind}]", dict(m.PARAMS) if m is v12 else {}, st)
        use()

    sweeps = {64: [{"HREG": 1}, {"BLOCK": 2048}, {"BLOCK": 4096}, {"BLOCK": 4096, "num_warps": 8},
                   {"BLOCK": 4096, "ATOMIC": 0}, {"BLOCK": 8192, "ATOMIC": 0, "num_warps": 8},
                   {"BLOCK": 8192, "ATOMIC": 0, "num_warps": 8, "HREG": 1}, {"BLOCK": 8192, "ATOMIC": 0},
                   {"BLOCK": 2048, "ATOMIC": 0, "HREG": 1}, {"TARGET_CTAS": 2048}, {"SEL_WARPS": 4},
                   {"SEL_WARPS": 8}, {"KD_WARPS": 8}, {"NS": 128}],
              4: [{"SEL_WARPS": 4}, {"BLOCK": 2048, "ATOMIC": 0}, {"BLOCK": 2048, "ATOMIC": 0, "HREG": 1},
                  {"NS": 128}, {"KD_WARPS": 8}]}
    plan = [("randn", 64, N), ("randn", 4, N), ("randn", 128, N), ("randn", 32, N), ("indexer", 64, N),
            ("ties", 64, N), ("randn", 128, 262144), ("relu-round", 32, N)]
    for kind, M, n in plan:
        if late():
            print(f"!! budget: skipped timing {kind} M={M}", flush=True)
            continue
        if kind == "ties":
            sets = [DB.topk_inputs(M, n, 100 + s) + (K,) for s in range(3)]
        else:
            sets = [gen(kind, M, n, 100 + s) + (K,) for s in range(3)]
        if M in (64, 4) and kind == "randn":
            st = DB.guarded("torch.topk", DB.time_graphs, lambda x, L, kk: torch.topk(x, kk, dim=1).indices, sets)
            if st:
                DB.record("dsa_topk", [M, n, K], f"torch.topk [{kind}]", {}, st)
        if not bad:
            time_it("v12", v12, M, n, kind, sets)
        time_it("best", best, M, n, kind, sets)
        time_it("v10", v10, M, n, kind, sets)
        if kind == "randn" and n == N and not bad:
            for over in sweeps.get(M, []):
                if late():
                    break
                if checked(over, [(M, N, "ties"), (M, N, "randn")]):
                    time_it("v12(sweep)", v12, M, n, kind, sets, over)
            for blk, C in ((1024, 16), (4096, 16), (8192, 16), (4096, 64)):
                st = DB.guarded("read floor", DB.time_graphs,
                                lambda x, L, k, blk=blk, C=C: read_floor(x, L, k, C=C, BLOCK=blk), sets)
                if st:
                    DB.record("dsa_topk", [M, n, K], "triton read floor [randn]", {"BLOCK": blk, "C": C}, st)
        del sets
        save(a.out)
        print(f"[{time.time() - T0:.0f}s]", flush=True)
    if not bad:
        for M in (64, 4):
            x, L = gen("randn", M, N, 7)
            DB.guarded("profile", profile_split, "v12", v12.forward, (x, L, K), f"randn M={M}")
    save(a.out)
    print(f"done in {time.time() - T0:.0f}s; clocks end: {DB.clocks()}", flush=True)


if __name__ == "__main__":
    main()
