"""Check and time the candidate kernels on a GPU (one process, many variants).

python bench/kernels/dev_bench.py [--out DIR] [--only topk,indexer,rmsnorm,cute] [--quick]

Correctness first (random non-zero inputs, ragged lengths, heavy ties, f32/f64 references),
then timing: each (kernel, params, shape) is captured in a CUDA graph per input set (3 sets),
replays are timed one by one with CUDA events, the L2 is flushed (512 MB write) before each
replay, sets are interleaved, median over all replays. Records go to OUT/kernels-dev.json.
"""
import argparse
import datetime
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import time
import traceback

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CAND = os.path.join(ROOT, "gpu_worker", "candidates")
RECORDS = []
FAILS = []
GPU = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
DATE = datetime.datetime.utcnow().strftime("%Y-%m-%d")
CMD = "python bench/kernels/dev_bench.py " + " ".join(sys.argv[1:])


def load(rel):
    path = os.path.join(CAND, rel)
    spec = importlib.util.spec_from_file_location(rel.replace("/", "_").replace(".py", ""), path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def clocks():
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw,"
                               "clocks_throttle_reasons.active", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception as e:  # noqa: BLE001
        return f"n/a ({e})"


_FLUSH = None


def flush_l2():
    global _FLUSH
    if _FLUSH is None:
        _FLUSH = torch.empty(512 * 1024 * 1024 // 4, dtype=torch.float32, device="cuda")
    _FLUSH.fill_(1.0)


def time_graphs(fn, sets, reps=15):
    """fn(*args) -> out. sets: list of arg tuples. Returns (median_us, p10, p90, n)."""
    graphs = []
    for args in sets:
        fn(*args)
        torch.cuda.synchronize()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            fn(*args)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn(*args)
        graphs.append(g)
    for g in graphs:
        g.replay()
    torch.cuda.synchronize()
    evs = []
    for _ in range(reps):
        for g in graphs:
            flush_l2()
            a = torch.cuda.Event(enable_timing=True)
            b = torch.cuda.Event(enable_timing=True)
            a.record()
            g.replay()
            b.record()
            evs.append((a, b))
    torch.cuda.synchronize()
    ts = sorted(a.elapsed_time(b) * 1000.0 for a, b in evs)
    n = len(ts)
    return statistics.median(ts), ts[n // 10], ts[(9 * n) // 10], n


def record(target, shape, kernel, params, stats, extra=None):
    med, p10, p90, n = stats
    r = {"target": target, "shape": shape, "kernel": kernel, "params": params, "median_us": round(med, 2),
         "p10_us": round(p10, 2), "p90_us": round(p90, 2), "n": n, "gpu": GPU, "date": DATE, "command": CMD}
    if extra:
        r.update(extra)
    RECORDS.append(r)
    print(f"  {target:18s} {str(shape):28s} {kernel:28s} {json.dumps(params):60s} {med:9.2f} us", flush=True)


def guarded(name, f, *a, **k):
    try:
        return f(*a, **k)
    except Exception as e:  # noqa: BLE001
        FAILS.append({"what": name, "error": repr(e)[:2000]})
        print(f"!! {name}: {e!r}"[:3000], flush=True)
        traceback.print_exc(limit=3)
        return None


# ----------------------------------------------------------------------------------- top-k
def topk_inputs(M, N, seed, ties=True, ragged=True):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(M, N, device="cuda", generator=g)
    lengths = torch.full((M,), N, dtype=torch.int32, device="cuda")
    if ragged and M > 1:
        lengths = torch.randint(1, N + 1, (M,), device="cuda", generator=g, dtype=torch.int32)
        lengths[0] = N
        if M > 2:
            lengths[1] = min(N, 1000)     # shorter than k
        if M > 3:
            lengths[2] = 2048
    if ties:
        if M > 4:
            x[3] = torch.randint(0, 4, (N,), device="cuda", generator=g).float()  # huge tie buckets
        if M > 5:
            x[4] = 1.5                                                             # all equal
        if M > 6:
            x[5] = torch.relu(torch.randn(N, device="cuda", generator=g)).round(decimals=1)
        if M > 7:
            x[6, ::2] = -0.0
            x[6, 1::2] = 0.0
        if M == 1:
            x[0] = torch.randint(0, 3, (N,), device="cuda", generator=g).float()
    return x, lengths


def check_topk_exact(out, x, lengths, k):
    M, N = x.shape
    assert out.shape == (M, k) and out.dtype == torch.int32, (out.shape, out.dtype)
    for i in range(M):
        L = int(min(max(int(lengths[i]), 0), N))
        ke = min(k, L)
        sel = out[i, :ke].long()
        assert bool((out[i, ke:] == -1).all()), f"row {i}: padding"
        assert bool(((sel >= 0) & (sel < L)).all()), f"row {i}: range"
        assert sel.unique().numel() == ke, f"row {i}: duplicates"
        if ke == 0:
            continue
        row = x[i, :L]
        kth = torch.topk(row, ke).values[-1]
        v = row[sel]
        assert float(v.min()) == float(kth), f"row {i}: kth {float(v.min())} vs {float(kth)}"
        assert int((v > kth).sum()) == int((row > kth).sum()), f"row {i}: count above kth"


def run_topk(quick):
    print("== dsa_topk", flush=True)
    mods = {"seed": load("dsa_topk/seed.py"), "best": load("dsa_topk/best.py"),
            "best_v3": load("dsa_topk/best_v3.py")}
    if quick:
        mods.pop("seed")
    k = 2048
    # correctness
    for name, m in mods.items():
        for (M, N) in [(64, 131072), (4, 131072), (1, 131072), (8, 4096), (3, 5000)]:
            for seed in (1,):
                def chk():
                    x, L = topk_inputs(M, N, seed)
                    xc = x.clone()
                    out = m.forward(x, L, k)
                    torch.cuda.synchronize()
                    assert torch.equal(x, xc), "input mutated"
                    check_topk_exact(out, x, L, k)
                    out2 = m.forward(x, L, k)
                    assert torch.equal(out, out2), "not deterministic"
                    return True
                ok = guarded(f"topk/{name} check {M}x{N} seed{seed}", chk)
                print(f"  check topk/{name} {M}x{N} seed{seed}: {'ok' if ok else 'FAIL'}", flush=True)
    # timing
    shapes = [(64, 131072), (4, 131072), (32, 32768), (128, 262144)]
    if quick:
        shapes = shapes[:2]

    def sets_for(M, N):
        return [topk_inputs(M, N, 100 + s, ties=False, ragged=False) for s in range(3)]

    for (M, N) in shapes:
        sets = [(x, L, k) for (x, L) in sets_for(M, N)]
        st = guarded("torch.topk", time_graphs, lambda x, L, kk: torch.topk(x, kk, dim=1).indices, sets)
        if st:
            record("dsa_topk", [M, N, k], "torch.topk", {}, st)
        for name, m in mods.items():
            st = guarded(f"topk/{name}", time_graphs, m.forward, sets)
            if st:
                record("dsa_topk", [M, N, k], name, dict(m.PARAMS), st)
    # the same kernels on indexer logits (ReLU sums: the k-th key's top-byte bin is much wider)
    for (M, N) in [(64, 131072), (4, 131072)]:
        sets = []
        for s_ in range(3):
            q, kk, w, _ = indexer_inputs(M, N, 400 + s_, ragged=False)
            sets.append((indexer_ref(q, kk, w).contiguous(), torch.full((M,), N, dtype=torch.int32, device="cuda"), k))
        x, L, _ = sets[0]
        for name, m in mods.items():
            ok = guarded(f"topk/{name} check indexer-logits", lambda: check_topk_exact(m.forward(x, L, k), x, L, k) or True)
            if not ok:
                continue
            st = guarded(f"topk/{name} indexer-logits", time_graphs, m.forward, sets)
            if st:
                record("dsa_topk", [M, N, k], name + " [indexer logits]", dict(m.PARAMS), st)
        st = guarded("torch.topk indexer-logits", time_graphs, lambda x, L, kk: torch.topk(x, kk, dim=1).indices, sets)
        if st:
            record("dsa_topk", [M, N, k], "torch.topk [indexer logits]", {}, st)
        del sets
    if quick:
        return
    # sweeps on the two target shapes
    best = mods["best"]
    base = dict(best.PARAMS)
    sweep = [dict(BLOCK=1024, TARGET_CTAS=1024, num_warps=4), dict(BLOCK=4096, TARGET_CTAS=512, num_warps=8),
             dict(BLOCK=2048, TARGET_CTAS=264, num_warps=8), dict(BLOCK=2048, TARGET_CTAS=1024, num_warps=4),
             dict(SEL_BLOCK=1024, SEL_WARPS=4), dict(BLOCK=4096, TARGET_CTAS=1024, num_warps=16)]
    if quick:
        sweep = sweep[:2]
    for (M, N) in [(64, 131072), (4, 131072)]:
        sets = [(x, L, k) for (x, L) in sets_for(M, N)]
        for p in sweep:
            best.PARAMS.update(p)
            ok = guarded("sweep check", lambda: check_topk_exact(best.forward(*topk_inputs(M, N, 7)[:2], k),
                                                                  *topk_inputs(M, N, 7), k) or True)
            if not ok:
                continue
            st = guarded(f"topk/best {p}", time_graphs, best.forward, sets)
            if st:
                record("dsa_topk", [M, N, k], "best(sweep)", dict(best.PARAMS), st)
        best.PARAMS.clear()
        best.PARAMS.update(base)
    seed = mods["seed"]
    sbase = dict(seed.PARAMS)
    for p in [dict(BLOCK=8192, num_warps=8), dict(BLOCK=2048, num_warps=4)][: (1 if quick else 2)]:
        seed.PARAMS.update(p)
        sets = [(x, L, k) for (x, L) in sets_for(64, 131072)]
        st = guarded(f"topk/seed {p}", time_graphs, seed.forward, sets)
        if st:
            record("dsa_topk", [64, 131072, k], "seed(sweep)", dict(seed.PARAMS), st)
    seed.PARAMS.clear()
    seed.PARAMS.update(sbase)


# ----------------------------------------------------------------------------------- indexer
def indexer_inputs(M, N, seed, ragged=True):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(M, 64, 128, device="cuda", generator=g).bfloat16()
    kk = torch.randn(N, 128, device="cuda", generator=g).bfloat16()
    w = torch.randn(M, 64, device="cuda", generator=g) * 0.1
    L = torch.full((M,), N, dtype=torch.int32, device="cuda")
    if ragged and M > 1:
        L = torch.randint(1, N + 1, (M,), device="cuda", generator=g, dtype=torch.int32)
        L[0] = N
        if M > 2:
            L[1] = min(N, 1000)
    return q, kk, w, L


def indexer_ref(q, kk, w):
    M = q.shape[0]
    torch.backends.cuda.matmul.allow_tf32 = False
    out = []
    for m0 in range(0, M, 8):
        s = torch.matmul(q[m0:m0 + 8].float(), kk.float().t())         # [m, 64, N]
        out.append((s.clamp_min(0) * w[m0:m0 + 8, :, None]).sum(1))
    return torch.cat(out, 0)


def indexer_torch(q, kk, w, L, k):
    M, H, D = q.shape
    s = torch.matmul(q.view(M * H, D), kk.t()).view(M, H, -1)
    lg = (s.relu().float() * w[:, :, None]).sum(1)
    return torch.topk(lg, k, dim=1).indices


def check_indexer(out, ref, L, k, rtol=2e-5):
    M, N = ref.shape
    assert out.shape == (M, k) and out.dtype == torch.int32
    worst = 0.0
    for i in range(M):
        Li = int(min(max(int(L[i]), 0), N))
        ke = min(k, Li)
        sel = out[i, :ke].long()
        assert bool((out[i, ke:] == -1).all()), f"row {i}: padding"
        assert bool(((sel >= 0) & (sel < Li)).all()), f"row {i}: range"
        assert sel.unique().numel() == ke, f"row {i}: duplicates"
        if ke == 0 or ke == Li:
            continue
        row = ref[i, :Li]
        kth = float(torch.topk(row, ke).values[-1])
        tol = rtol * float(row.abs().max())
        v = row[sel]
        mask = torch.ones(Li, dtype=torch.bool, device=row.device)
        mask[sel] = False
        lo = float(v.min())
        hi = float(row[mask].max())
        worst = max(worst, (kth - lo) / float(row.abs().max()), (hi - kth) / float(row.abs().max()))
        assert lo >= kth - tol, f"row {i}: selected {lo} < kth {kth} - tol"
        assert hi <= kth + tol, f"row {i}: left out {hi} > kth {kth} + tol"
    return worst


def run_indexer(quick):
    print("== dsa_indexer_topk", flush=True)
    mods = {"seed": load("dsa_indexer_topk/seed.py"), "best": load("dsa_indexer_topk/best.py"),
            "best_v3": load("dsa_indexer_topk/best_v3.py")}
    if quick:
        mods.pop("seed")
    k = 2048
    for name, m in mods.items():
        for (M, N) in [(64, 131072), (3, 40000), (8, 1500)]:
            def chk():
                q, kk, w, L = indexer_inputs(M, N, 11)
                out = m.forward(q, kk, w, L, k)
                torch.cuda.synchronize()
                worst = check_indexer(out, indexer_ref(q, kk, w), L, k)
                out2 = m.forward(q, kk, w, L, k)
                assert torch.equal(out, out2), "not deterministic"
                return worst
            r = guarded(f"indexer/{name} check {M}x{N}", chk)
            print(f"  check indexer/{name} {M}x{N}: {'FAIL' if r is None else 'ok (worst rel boundary gap %.2e)' % r}",
                  flush=True)
    shapes = [(64, 131072), (4, 131072)]
    if quick:
        shapes = shapes[:1]
    for (M, N) in shapes:
        sets = [tuple(indexer_inputs(M, N, 200 + s, ragged=False)) + (k,) for s in range(3)]
        st = guarded("indexer torch", time_graphs, indexer_torch, sets, reps=5)
        if st:
            record("dsa_indexer_topk", [M, N, k], "torch(matmul+topk)", {}, st)
        for name, m in mods.items():
            st = guarded(f"indexer/{name}", time_graphs, m.forward, sets, reps=5)
            if st:
                record("dsa_indexer_topk", [M, N, k], name, dict(m.PARAMS), st,
                       {"tflops": round(16384 * M * N / (st[0] * 1e-6) / 1e12, 1)})
    # sweep best's logits kernel on the target shape
    best = mods["best"]
    base = dict(best.PARAMS)
    sweep = [dict(ROWS=4, BLOCK_N=64), dict(ROWS=4, BLOCK_N=64, N_PER_PROG=8192), dict(ROWS=4, BLOCK_N=128, num_stages=2),
             dict(ROWS=2, BLOCK_N=64, num_warps=4)]
    if quick:
        sweep = sweep[:2]
    M, N = 64, 131072
    sets = [tuple(indexer_inputs(M, N, 200 + s, ragged=False)) + (k,) for s in range(3)]
    q, kk, w, L = indexer_inputs(M, N, 12)
    ref = indexer_ref(q, kk, w)
    for p in sweep:
        best.PARAMS.clear()
        best.PARAMS.update(base)
        best.PARAMS.update(p)
        ok = guarded(f"indexer sweep check {p}", lambda: check_indexer(best.forward(q, kk, w, L, k), ref, L, k) >= 0)
        if not ok:
            continue
        st = guarded(f"indexer/best {p}", time_graphs, best.forward, sets, reps=5)
        if st:
            record("dsa_indexer_topk", [M, N, k], "best(sweep)", dict(best.PARAMS), st,
                   {"tflops": round(16384 * M * N / (st[0] * 1e-6) / 1e12, 1)})
    best.PARAMS.clear()
    best.PARAMS.update(base)
    del ref
    seed = mods["seed"]
    sbase = dict(seed.PARAMS)
    for p in [dict(CHUNK=65536), dict(MERGE_BLOCK=8192, MERGE_WARPS=16)][: (1 if quick else 2)]:
        seed.PARAMS.update(p)
        st = guarded(f"indexer/seed {p}", time_graphs, seed.forward, sets, reps=5)
        if st:
            record("dsa_indexer_topk", [M, N, k], "seed(sweep)", dict(seed.PARAMS), st)
        seed.PARAMS.clear()
        seed.PARAMS.update(sbase)


# ----------------------------------------------------------------------------------- rmsnorm
def rms_inputs(T, D, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(T, D, device="cuda", generator=g).bfloat16()
    r = torch.randn(T, D, device="cuda", generator=g).bfloat16()
    w = (1 + 0.1 * torch.randn(D, device="cuda", generator=g)).bfloat16()
    return x, r, w, 1e-6


def rms_torch(x, r, w, eps):
    h = x + r
    return h, torch.nn.functional.rms_norm(h, (x.shape[-1],), w, eps)


def check_rms(fn, T, D):
    x, r, w, eps = rms_inputs(T, D, 5)
    hp = torch.full_like(x, float("nan"))
    h, y = fn(x, r, w, eps)
    torch.cuda.synchronize()
    href = x + r
    assert torch.equal(h, href), f"h mismatch: max {float((h.float() - href.float()).abs().max())}"
    hd = href.double()
    yref = hd * torch.rsqrt(hd.pow(2).mean(-1, keepdim=True) + eps) * w.double()
    rel = float((y.double() - yref).norm() / yref.norm())
    assert not torch.isnan(y).any()
    assert rel < 8e-3, f"y rel err {rel}"
    del hp
    return rel


def run_rms(quick, with_cute):
    print("== add_rmsnorm", flush=True)
    mods = {"seed": load("add_rmsnorm/seed.py")}
    if with_cute:
        m = guarded("import seed_cute", load, "add_rmsnorm/seed_cute.py")
        if m is not None:
            mods["seed_cute"] = m
    for name, m in mods.items():
        for (T, D) in [(16384, 8192), (4096, 4096), (1, 7168), (7, 3000), (33, 2048), (5, 5120)]:
            r = guarded(f"rms/{name} check {T}x{D}", check_rms, m.forward, T, D)
            print(f"  check rms/{name} {T}x{D}: {'FAIL' if r is None else 'ok rel %.2e' % r}", flush=True)
    shapes = [(16384, 8192), (4096, 4096), (1, 7168)]
    if quick:
        shapes = shapes[:1]
    for (T, D) in shapes:
        sets = [rms_inputs(T, D, 300 + s) for s in range(3)]
        nbytes = 8 * T * D + 2 * D
        st = guarded("rms torch", time_graphs, rms_torch, sets)
        if st:
            record("add_rmsnorm", [T, D], "torch(add+rms_norm)", {}, st, {"TBps": round(nbytes / st[0] / 1e6, 3)})
        for name, m in mods.items():
            st = guarded(f"rms/{name}", time_graphs, m.forward, sets)
            if st:
                record("add_rmsnorm", [T, D], name, dict(m.PARAMS), st, {"TBps": round(nbytes / st[0] / 1e6, 3)})
    # sweeps at the target shape
    T, D = 16384, 8192
    sets = [rms_inputs(T, D, 300 + s) for s in range(3)]
    nbytes = 8 * T * D + 2 * D
    sweeps = {"seed": [dict(ROWS=1, num_warps=w) for w in (4, 16)],
              "seed_cute": [dict(THREADS=t) for t in (512, 1024)]}
    for name, m in mods.items():
        base = dict(m.PARAMS)
        for p in sweeps.get(name, [])[: (1 if quick else 9)]:
            m.PARAMS.update(p)
            ok = guarded(f"rms sweep check {name} {p}", check_rms, m.forward, 64, D)
            if ok is None:
                continue
            st = guarded(f"rms/{name} {p}", time_graphs, m.forward, sets)
            if st:
                record("add_rmsnorm", [T, D], name + "(sweep)", dict(m.PARAMS), st,
                       {"TBps": round(nbytes / st[0] / 1e6, 3)})
            m.PARAMS.clear()
            m.PARAMS.update(base)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--only", default="topk,indexer,rmsnorm,cute")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    only = set(a.only.split(","))
    t0 = time.time()
    info = {"gpu": GPU, "torch": torch.__version__, "clocks_before": clocks()}
    try:
        import triton
        info["triton"] = triton.__version__
    except Exception:  # noqa: BLE001
        pass
    print(json.dumps(info), flush=True)
    try:
        if "rmsnorm" in only or "cute" in only:
            run_rms(a.quick, "cute" in only)
        if "topk" in only:
            run_topk(a.quick)
        if "indexer" in only:
            run_indexer(a.quick)
    finally:
        info["clocks_after"] = clocks()
        info["wall_s"] = round(time.time() - t0, 1)
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "kernels-dev.json"), "w") as f:
            json.dump({"info": info, "records": RECORDS, "failures": FAILS}, f, indent=1)
        print(json.dumps(info), flush=True)
        print(f"FAILURES: {len(FAILS)}")
        for fl in FAILS:
            print("  ", fl["what"], fl["error"][:300])


if __name__ == "__main__":
    main()
