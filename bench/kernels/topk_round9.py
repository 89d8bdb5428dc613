"""Round 9: best_v15 (best_v14 with the next block's load issued before this block's slots are taken) and sweeps.

python bench/kernels/topk_round9.py [--out DIR] [--budget SECONDS] [--run NAME]
(best_v13..best_v16 and best_v6b were removed after round 11, once best_v17 carried their changes;
they are in commit 75ecd96.)

Method as dev_bench.py (imported): correctness on the GPU first (set-exact, deterministic as a set, input
not mutated) for every variant and parameter set before it is timed, then CUDA-graph replays timed one by
one with events, 512 MB L2 flush before each, 3 input sets interleaved, median of 45 replays. Then a few
sweeps, the Triton read floor, and a per-kernel split (torch.profiler, eager).
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
    with open(os.path.join(out_dir, f"kernels-dev-round9-{RUN}.json"), "w") as f:
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
    DB.CMD = "python bench/kernels/topk_round9.py " + " ".join(sys.argv[1:])
    late = lambda: time.time() - T0 > a.budget  # noqa: E731
    print("clocks start:", DB.clocks(), flush=True)
    mods = {n: DB.load(f"dsa_topk/{n}.py") for n in ("best_v14", "best_v15", "best")}
    base = {n: dict(m.PARAMS) for n, m in mods.items()}

    def use(name, over=None):
        p = mods[name].PARAMS
        p.clear(); p.update(base[name]); p.update(over or {})

    def chk(m, M, n, kind, seed=1):
        if kind == "ties":
            x, L = DB.topk_inputs(M, n, seed)
        else:
            x, L = gen(kind, M, n, seed)
            L[0] = n - 5
        xc = x.clone()
        out = m.forward(x, L, K)
        torch.cuda.synchronize()
        assert torch.equal(x, xc), "input mutated"
        DB.check_topk_exact(out, x, L, K)
        assert torch.equal(out.sort(1).values, m.forward(x, L, K).sort(1).values), "not deterministic as a set"
        return True

    ok = {}

    def checked(name, over, cases):
        use(name, over)
        good = all(DB.guarded(f"{name} check {c} {over}", chk, mods[name], *c) for c in cases)
        DB.RECORDS.append({"target": "dsa_topk", "kind": "check", "variant": name, "params": over,
                           "cases": [list(c) for c in cases], "ok": bool(good)})
        print(f"  check {name} {over}: {'ok' if good else 'FAIL'}", flush=True)
        use(name)
        return good

    full = [(64, N, "ties"), (4, N, "ties"), (32, N, "ties"), (1, N, "ties"), (3, 5000, "ties"),
            (128, 262144, "ties"), (33, 65537, "ties"), (7, 4099, "ties"), (5, 1000, "ties"),
            (32, N, "relu-sparse"), (32, N, "relu-round"), (8, N, "indexer"), (64, N, "randn")]
    ok["best_v15"] = checked("best_v15", {}, full)
    for over in ({"SMALLR": 8}, {"ALPHA_X2": 0, "BETA": 1}, {"ATOMIC": 0}):
        ok["best_v15"] &= checked("best_v15", over, [(16, N, "ties"), (16, N, "randn"), (32, N, "relu-round")])
    ok.update(best_v14=True, best=True)
    print(f"[{time.time() - T0:.0f}s] checks done: {ok}", flush=True)
    save(a.out)

    def time_it(name, M, n, kind, sets, over=None, label=None):
        if not ok[name]:
            return
        use(name, over)
        st = DB.guarded(f"{name} {kind} {over}", DB.time_graphs, mods[name].forward, sets)
        if st:
            DB.record("dsa_topk", [M, n, K], f"{label or name} [{kind}]", dict(mods[name].PARAMS), st)
        use(name)

    sweeps = {64: [{"ATOMIC": 0}, {"NS": 128}, {"ATOMIC": 0, "NS": 128}, {"BLOCK": 2048}, {"BLOCK": 2048, "ATOMIC": 0},
                   {"BLOCK": 512}, {"num_warps": 8}, {"TARGET_CTAS": 2048}, {"TARGET_CTAS": 512}],
              4: [{"ATOMIC": 0}, {"NS": 128}, {"BLOCK": 2048, "ATOMIC": 0}, {"BLOCK": 2048, "ATOMIC": 0, "NS": 128},
                  {"NS": 128, "ATOMIC": 0}, {"MAX_C": 32}]}
    big = ("best_v14", "best_v15")
    small = big
    plan = [("randn", 64, N, big + ("best",)), ("randn", 4, N, small + ("best",)),
            ("randn", 32, N, big), ("randn", 16, N, small), ("randn", 1, N, small),
            ("randn", 128, N, big), ("indexer", 64, N, big), ("randn", 128, 262144, big),
            ("ties", 64, N, big), ("relu-round", 32, N, big)]
    for kind, M, n, names in plan:
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
            st = DB.guarded("read floor", DB.time_graphs, lambda x, L, k: read_floor(x, L, k, C=16, BLOCK=1024), sets)
            if st:
                DB.record("dsa_topk", [M, n, K], "triton read floor [randn]", {"BLOCK": 1024, "C": 16}, st)
        for name in names:
            time_it(name, M, n, kind, sets)
        if kind == "randn" and n == N and ok["best_v15"]:
            for over in sweeps.get(M, []):
                if late():
                    break
                if checked("best_v15", over, [(M, N, "ties"), (M, N, "randn")]):
                    time_it("best_v15", M, n, kind, sets, over, label="best_v15(sweep)")
        del sets
        save(a.out)
        print(f"[{time.time() - T0:.0f}s]", flush=True)
    for M in (64, 4):
        x, L = gen("randn", M, N, 7)
        for name in ("best_v14", "best_v15"):
            if ok[name] and not late():
                DB.guarded("profile", profile_split, name, mods[name].forward, (x, L, K), f"randn M={M}")
    save(a.out)
    print(f"done in {time.time() - T0:.0f}s; clocks end: {DB.clocks()}", flush=True)


if __name__ == "__main__":
    main()
