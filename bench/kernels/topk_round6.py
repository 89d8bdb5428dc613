"""Round 6: best_v10 (KC selects from KB's digit histograms) against best (v8/v6) and torch.topk.
(Run 2 had --main v11 --other v10; best_v11.py was removed after it, see candidates/NOTES.md.)

python bench/kernels/topk_round6.py [--out DIR] [--budget SECONDS] [--run NAME] [--main v11] [--other v10]

Method as dev_bench.py (imported): correctness on the GPU first (set-exact, deterministic as a set,
input not mutated), then CUDA-graph replays timed one by one with events, 512 MB L2 flush before each,
3 input sets interleaved, median of 45 replays. For each v10 timing the rows are classified by the
path KC takes (all: n_gt == k; fast: pairwise rank of one digit; radix: best_v8's select; B: ties at
the threshold; C: the one-program fallback), recomputed from KA and KB. Then a per-kernel split and
small sweeps.
"""
import argparse
import json
import os
import sys
import time

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dev_bench as DB
from topk_round2 import gen
from topk_round4 import profile_split, read_floor

T0 = time.time()
K = 2048
N = 131072
RUN = "run1"


def paths10(m, x, L):
    """Rows per KC path for best_v10 module m on (x, L), from its own KA and KB."""
    p = dict(m.PARAMS)
    M, n = x.shape
    nblk = triton.cdiv(n, p["BLOCK"])
    C = min(max(p["MIN_C"], triton.next_power_of_2(triton.cdiv(p["TARGET_CTAS"], M))), p["MAX_C"],
            1 << (nblk.bit_length() - 1))
    RC = 2 * p["SMALL"] // C
    thr = torch.empty((M, 2), dtype=torch.int32, device=x.device)
    tick = (torch.empty(M, dtype=torch.int32, device=x.device),) if "tick_ptr" in m._ka_sample.arg_names else ()
    cnt = torch.empty((M, C, 2), dtype=torch.int32, device=x.device)
    cand = torch.empty((2, M, C, RC), dtype=torch.int32, device=x.device)
    scra = torch.empty((M, p["SMALLTA"]), dtype=torch.int32, device=x.device)
    hist = torch.empty((M, C, 256), dtype=torch.int32, device=x.device)
    m._ka_sample[(M,)](x, x.stride(0), L, thr, cnt, *tick, scra, n, K, p["SMALL"], C, NS=p["NS"], G=p["G"],
                       ALPHA_X2=p["ALPHA_X2"], BETA=p["BETA"], CB=64, SMALLTA=p["SMALLTA"],
                       SPAN_BITS=p["SPAN_BITS"], num_warps=8)
    m._kb_filter[(M, C)](x, x.stride(0), L, thr, cnt, cand[0], cand[1], hist, n, K, C, RC, BLOCK=p["BLOCK"],
                         ATOMIC=p["ATOMIC"], HB=256, num_warps=p["num_warps"])
    ke = torch.clamp(L.long().clamp(min=0, max=n), max=K)
    ngt = cnt[:, :, 0].long().sum(1)
    neq = cnt[:, :, 1].long().sum(1)
    h = hist.long().sum(1)                                    # [M, 256]
    ge = h.flip(1).cumsum(1).flip(1)
    bins = torch.arange(256, device=x.device)
    dsel = torch.where(ge >= ke[:, None], bins, 0).amax(1)
    csel = h.gather(1, dsel[:, None])[:, 0]
    c = (cnt[:, :, 0].amax(1) > RC) | (ngt + neq < ke)
    allr = ~c & (ngt == ke)
    a = ~c & (ngt > ke)
    fast = a & (dsel < 255) & (csel <= p["SMALLR"])
    return {"all": int(allr.sum()), "fast": int(fast.sum()), "radix": int((a & ~fast).sum()),
            "B": int((~c & (ngt < ke)).sum()), "C": int(c.sum()), "n_gt_mean": round(float(ngt.float().mean()), 1),
            "digit_count_max": int(torch.where(a, csel, 0).max())}


def save(out_dir):
    with open(os.path.join(out_dir, f"kernels-dev-round6-{RUN}.json"), "w") as f:
        json.dump({"records": DB.RECORDS, "fails": DB.FAILS, "gpu": DB.GPU, "clocks_end": DB.clocks(),
                   "elapsed_s": round(time.time() - T0, 1)}, f, indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--budget", type=float, default=240.0)
    ap.add_argument("--run", default="run1", help="suffix of the output file")
    ap.add_argument("--main", default="v10", help="the variant checked, timed, profiled and swept (best_MAIN.py)")
    ap.add_argument("--other", default="v8", help="a variant checked on a few inputs and timed alongside")
    a = ap.parse_args()
    mn, ot = a.main, a.other
    os.makedirs(a.out, exist_ok=True)
    global RUN
    RUN = a.run
    DB.CMD = "python bench/kernels/topk_round6.py " + " ".join(sys.argv[1:])
    late = lambda: time.time() - T0 > a.budget
    print("clocks start:", DB.clocks(), flush=True)
    v10 = DB.load(f"dsa_topk/best_{mn}.py")
    v9 = DB.load(f"dsa_topk/best_{ot}.py")
    best = DB.load("dsa_topk/best.py")
    base = dict(v10.PARAMS)

    def use(over=None):
        v10.PARAMS.clear(); v10.PARAMS.update(base); v10.PARAMS.update(over or {})

    checks = [(64, N, "ties"), (4, N, "ties"), (32, N, "ties"), (1, N, "ties"), (3, 5000, "ties"),
              (128, 262144, "ties"), (33, 65537, "ties"), (7, 4099, "ties"), (5, 1000, "ties"),
              (32, N, "relu-sparse"), (32, N, "relu-round"), (8, N, "indexer"), (64, N, "randn"),
              (16, N, "randn", {"ALPHA_X2": 0, "BETA": 1}), (16, N, "ties", {"SMALLR": 8}),
              (16, N, "randn", {"ATOMIC": 0, "SPAN_BITS": 8})]
    bad = False
    for c in checks:
        M, n, kind = c[:3]
        over = c[3] if len(c) > 3 else {}
        use(over)

        def chk(m, M=M, n=n, kind=kind):
            if kind == "ties":
                x, L = DB.topk_inputs(M, n, 1)
            else:
                x, L = gen(kind, M, n, 1)
                L[0] = n - 5
            xc = x.clone()
            out = m.forward(x, L, K)
            torch.cuda.synchronize()
            assert torch.equal(x, xc), "input mutated"
            DB.check_topk_exact(out, x, L, K)
            assert torch.equal(out.sort(1).values, m.forward(x, L, K).sort(1).values), "not deterministic as a set"
            return paths10(v10, x, L) if m is v10 else {}
        pa = DB.guarded(f"{mn} check {M}x{n} {kind} {over}", chk, v10)
        print(f"  check {mn} {M}x{n} {kind} {over}: {'FAIL' if pa is None else f'ok, paths {pa}'}", flush=True)
        DB.RECORDS.append({"target": "dsa_topk", "kind": "check", "variant": mn, "shape": [M, n, K],
                           "input": kind, "params": over, "ok": pa is not None, "paths": pa})
        bad |= pa is None
        if not over and kind in ("ties", "relu-round") and M >= 32:
            ok9 = DB.guarded(f"{ot} check {M}x{n} {kind}", chk, v9)
            print(f"  check {ot} {M}x{n} {kind}: {'FAIL' if ok9 is None else 'ok'}", flush=True)
            DB.RECORDS.append({"target": "dsa_topk", "kind": "check", "variant": ot, "shape": [M, n, K],
                               "input": kind, "ok": ok9 is not None})
    use()
    print(f"[{time.time() - T0:.0f}s] checks done; {mn} failing: {bad}", flush=True)
    save(a.out)

    def time_it(label, m, M, n, kind, sets, over=None, with_paths=False):
        if m is v10:
            use(over)
        pa = DB.guarded("paths", paths10, v10, sets[0][0], sets[0][1]) if with_paths else None
        st = DB.guarded(f"{label} {kind}", DB.time_graphs, m.forward, sets)
        if st:
            DB.record("dsa_topk", [M, n, K], f"{label} [{kind}]", dict(m.PARAMS) if m is v10 else {}, st,
                      {"paths": pa} if pa else None)
        use()

    plan = [("randn", 64, N), ("randn", 4, N), ("ties", 64, N), ("randn", 128, N), ("randn", 32, N),
            ("indexer", 64, N), ("relu-round", 32, N), ("relu-sparse", 32, N), ("randn", 128, 262144),
            ("randn", 1, N), ("randn", 16, 4096)]
    for kind, M, n in plan:
        if late():
            print(f"!! budget: skipped timing {kind} M={M}", flush=True)
            continue
        if kind == "ties":
            sets = [DB.topk_inputs(M, n, 100 + s) + (K,) for s in range(3)]
        else:
            sets = [gen(kind, M, n, 100 + s) + (K,) for s in range(3)]
        st = DB.guarded("torch.topk", DB.time_graphs, lambda x, L, kk: torch.topk(x, kk, dim=1).indices, sets)
        if st:
            DB.record("dsa_topk", [M, n, K], f"torch.topk [{kind}]", {}, st)
        if not bad:
            time_it(mn, v10, M, n, kind, sets, with_paths=True)
        time_it("best", best, M, n, kind, sets)
        time_it(ot, v9, M, n, kind, sets)
        if kind == "randn" and n == N and M in (64, 4):
            st = DB.guarded("read floor", DB.time_graphs, read_floor, sets)
            if st:
                DB.record("dsa_topk", [M, n, K], "triton read floor [randn]", {}, st)
        del sets
        save(a.out)
        print(f"[{time.time() - T0:.0f}s]", flush=True)
    if bad:
        return
    for kind, M in [("randn", 64), ("randn", 4)]:
        if not late():
            x, L = gen(kind, M, N, 7)
            DB.guarded("profile", profile_split, mn, v10.forward, (x, L, K), f"{kind} M={M}")
    save(a.out)

    # ---- indexer pipeline: best (v8/v6 top-k) vs best_MAIN, best_OTHER
    if not late():
        IX = {"best": DB.load("dsa_indexer_topk/best.py")}
        for v in (mn, ot):
            if os.path.exists(os.path.join(DB.CAND, f"dsa_indexer_topk/best_{v}.py")):
                IX[f"best_{v}"] = DB.load(f"dsa_indexer_topk/best_{v}.py")
        q, kk, w, L = DB.indexer_inputs(64, N, 11)
        ref = DB.indexer_ref(q, kk, w)
        okx = {}
        for name, m in IX.items():
            def chk(m=m):
                out = m.forward(q, kk, w, L, K)
                torch.cuda.synchronize()
                worst = DB.check_indexer(out, ref, L, K)
                assert torch.equal(out.sort(1).values, m.forward(q, kk, w, L, K).sort(1).values), "not deterministic"
                return worst
            r = DB.guarded(f"indexer/{name} check", chk)
            print(f"  check indexer/{name} 64x{N}: {'FAIL' if r is None else f'ok (worst gap {r:.2e})'}", flush=True)
            okx[name] = r is not None
        del ref
        for M in (64, 4):
            sets = [tuple(DB.indexer_inputs(M, N, 200 + s, ragged=False)) + (K,) for s in range(3)]
            for name, m in IX.items():
                if okx[name] and not late():
                    st = DB.guarded(f"indexer/{name}", DB.time_graphs, m.forward, sets, reps=5)
                    if st:
                        DB.record("dsa_indexer_topk", [M, N, K], name, dict(m.PARAMS), st)
            del sets
        save(a.out)
        print(f"[{time.time() - T0:.0f}s]", flush=True)

    sweeps = [(64, {"SEL_WARPS": 4}), (4, {"SEL_WARPS": 4}), (64, {"SEL_WARPS": 16}), (4, {"SEL_WARPS": 16}),
              (64, {"BLOCK": 2048}), (64, {"BLOCK": 4096}), (64, {"BLOCK": 4096, "num_warps": 8}),
              (4, {"BLOCK": 2048}), (64, {"NS": 128}), (4, {"NS": 128}), (64, {"TARGET_CTAS": 2048}),
              (4, {"MIN_C": 32}), (128, {"TARGET_CTAS": 2048}), (64, {"BLOCK": 512, "num_warps": 2})]
    cache = {}
    for M, pp in sweeps:
        if late():
            print(f"!! budget: skipped sweep {M} {pp}", flush=True)
            continue
        if M not in cache:
            cache = {M: [gen("randn", M, N, 100 + s) + (K,) for s in range(3)]}
        use(pp)
        x, L = DB.topk_inputs(M, N, 3)
        ok = DB.guarded("sweep check", lambda x=x, L=L: DB.check_topk_exact(v10.forward(x, L, K), x, L, K) or True)
        if ok:
            time_it(f"{mn}(sweep)", v10, M, N, "randn", cache[M], pp)
    use()
    save(a.out)
    print(f"done in {time.time() - T0:.0f}s; clocks end: {DB.clocks()}", flush=True)


if __name__ == "__main__":
    main()
