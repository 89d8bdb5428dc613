"""The driver of the top-k dev rounds 8 to 11 (topk_round8.py .. topk_round11.py hold each round's plan).

Method as dev_bench.py (imported): correctness on the GPU first (set-exact, deterministic as a set, input
not mutated) for every variant and parameter set before it is timed, then CUDA-graph replays timed one by
one with events, 512 MB L2 flush before each, 3 input sets interleaved, median of 45 replays; torch.topk and
the Triton read floor at 64 and 4 rows; sweeps of one variant's parameters; a per-kernel split
(torch.profiler, eager). Writes OUT/kernels-dev-round<R>-<run>.json after each shape.
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

K = 2048
N = 131072
FULL = [(64, N, "ties"), (4, N, "ties"), (32, N, "ties"), (1, N, "ties"), (3, 5000, "ties"),
        (128, 262144, "ties"), (33, 65537, "ties"), (7, 4099, "ties"), (5, 1000, "ties"),
        (32, N, "relu-sparse"), (32, N, "relu-round"), (8, N, "indexer"), (64, N, "randn")]
SMALL = [(16, N, "ties"), (16, N, "randn"), (32, N, "relu-round")]


def run(round_no, load, checks, sweep, sweeps, plan, profile):
    """load: dsa_topk variants (file stems); checks: {variant: [parameter overrides]}, each variant checked
    on FULL and each override on SMALL (variants not named are trusted: earlier rounds checked them);
    sweep: the variant whose `sweeps` {M: [overrides]} run at (M, 128K) randn ({(kind, M, n): [...]} at that
    plan entry); plan: [(kind, M, n,
    variants)]; profile: variants split per kernel at 64 and 4 rows."""
    t0 = time.time()
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--budget", type=float, default=240.0)
    ap.add_argument("--run", default="run1", help="suffix of the output file")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    DB.CMD = f"python bench/kernels/topk_round{round_no}.py " + " ".join(sys.argv[1:])
    late = lambda: time.time() - t0 > a.budget
    out_path = os.path.join(a.out, f"kernels-dev-round{round_no}-{a.run}.json")

    def save():
        with open(out_path, "w") as f:
            json.dump({"records": DB.RECORDS, "fails": DB.FAILS, "gpu": DB.GPU, "clocks_end": DB.clocks(),
                       "elapsed_s": round(time.time() - t0, 1)}, f, indent=1)

    print("clocks start:", DB.clocks(), flush=True)
    mods = {n: DB.load(f"dsa_topk/{n}.py") for n in load}
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

    def checked(name, over, cases):
        use(name, over)
        good = all(DB.guarded(f"{name} check {c} {over}", chk, mods[name], *c) for c in cases)
        DB.RECORDS.append({"target": "dsa_topk", "kind": "check", "variant": name, "params": over,
                           "cases": [list(c) for c in cases], "ok": bool(good)})
        print(f"  check {name} {over}: {'ok' if good else 'FAIL'}", flush=True)
        use(name)
        return good

    ok = {n: True for n in load}
    for name, overs in checks.items():
        ok[name] = checked(name, {}, FULL)
        for over in overs:
            ok[name] &= checked(name, over, SMALL)
    print(f"[{time.time() - t0:.0f}s] checks done: {ok}", flush=True)
    save()

    def time_it(name, M, n, kind, sets, over=None, label=None):
        if not ok[name]:
            return
        use(name, over)
        st = DB.guarded(f"{name} {kind} {over}", DB.time_graphs, mods[name].forward, sets)
        if st:
            DB.record("dsa_topk", [M, n, K], f"{label or name} [{kind}]", dict(mods[name].PARAMS), st)
        use(name)

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
        # sweeps keyed by M run at (M, 128K) randn; keyed by (kind, M, n), at that plan entry
        overs = sweeps.get((kind, M, n), sweeps.get(M, []) if (kind == "randn" and n == N) else [])
        if ok[sweep]:
            for over in overs:
                if late():
                    break
                if checked(sweep, over, [(M, n, "ties"), (M, n, "randn")]):
                    time_it(sweep, M, n, kind, sets, over, label=f"{sweep}(sweep)")
        del sets
        save()
        print(f"[{time.time() - t0:.0f}s]", flush=True)
    for M in (64, 4):
        x, L = gen("randn", M, N, 7)
        for name in profile:
            if ok[name] and not late():
                DB.guarded("profile", profile_split, name, mods[name].forward, (x, L, K), f"randn M={M}")
    save()
    print(f"done in {time.time() - t0:.0f}s; clocks end: {DB.clocks()}", flush=True)
