"""E2E proof on an H200: the DeepSeek-V3.2-shaped decode step (mini preset) with the default
top-k and the best dsa_topk candidate, both through dispatch, one CUDA graph per step; the same
step with graphs off (eager); and the cost of dispatch's selection.

    python bench/e2e_h200.py --out bench/results/h200

Writes e2e.json (records), e2e_gate.json (the full gate result) and e2e.md (tables).

    python bench/e2e_h200.py --slot dsa_indexer_topk_fp8 [--candidate FILE] --out DIR

runs only the gate of that slot for one candidate (default: the target's best.py), largest point first,
and rewrites DIR/e2e_gate_<slot>.json as each point ends: a lease cut short keeps what it measured.
"""

import argparse
import datetime
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np
import torch

from gpu_worker.dispatch import Dispatcher, single_kernel_config
from gpu_worker.e2e import run_gate
from gpu_worker.e2e.gate import capture_step, time_interleaved
from gpu_worker.e2e.harness import PROFILES
from gpu_worker.e2e.model import DecodeModel, _index_logits_torch, load_preset
from gpu_worker.e2e.quant import quantize_rows
from gpu_worker.e2e.parity import selection_valid

CANDIDATES = ROOT / "gpu_worker" / "candidates" / "dsa_topk"


def smi() -> str:
    try:
        return subprocess.run(
            [
                "nvidia-smi",
                (
                    "--query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,"
                    "power.draw,clocks_throttle_reasons.active"
                ),
                "--format=csv,noheader",
            ],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"nvidia-smi failed: {exc}"


def ci_of_median(ms, batch, resamples=2000, seed=0):
    a = np.asarray(ms)
    rng = np.random.default_rng(seed)
    med = np.median(a[rng.integers(0, len(a), size=(resamples, len(a)))], axis=1)
    tok = batch / (med / 1e3)
    return [float(np.percentile(tok, 2.5)), float(np.percentile(tok, 97.5))]


def check_indexer(log):
    from gpu_worker.e2e.indexer import index_logits_triton

    p = load_preset("mini")
    dt = getattr(torch, p["index_cache_dtype"])
    B, H, D, L = 3, p["index_heads"], p["index_head_dim"], 5000
    q, qs = quantize_rows(torch.randn(B, H, D, device="cuda"), dt)
    w = torch.randn(B, H, device="cuda") * qs
    k, ks = quantize_rows(torch.randn(B, L, D, device="cuda"), dt)
    o1, o2 = torch.empty(B, L, device="cuda"), torch.empty(B, L, device="cuda")
    index_logits_triton(q, w, k, ks, o1)
    _index_logits_torch(q, w, k, ks, o2)
    err = float((o1 - o2).norm() / o2.norm())
    log(f"indexer check ({p['index_cache_dtype']}): rel err vs torch f32 = {err:.2e}")
    assert err < 1e-3, err  # Hopper FP8 MMA accumulates with fewer mantissa bits than f32
    return err


def check_candidate(src, log):
    d = Dispatcher()
    d.load(single_kernel_config(target="dsa_topk", hardware="h200", candidate_id="best", source=src))
    out = {}
    for m, n in [(32, 131072), (8, 32768), (1, 8192), (5, 3000)]:
        x = torch.randn(m, n, device="cuda")
        lengths = torch.randint(max(1, n // 2), n + 1, (m,), device="cuda", dtype=torch.int32)
        idx = d(x, lengths, 2048)
        ok = bool(selection_valid(x, lengths, idx, 2048).all())
        out[f"{m}x{n}"] = ok
    log(f"candidate standalone check (exact sets): {out}")
    return out


def time_eager(model, topk, rounds, n):
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ms, wall = [], []
    for _ in range(rounds):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        s.record()
        for _ in range(n):
            model.step(topk)
        e.record()
        e.synchronize()
        wall.append((time.perf_counter() - t0) * 1e3 / n)
        ms.append(s.elapsed_time(e) / n)
    return ms, wall


def graphs_off(cfg, preset, src, log):
    """The same step eager: the cost of turning graphs off on this workload."""
    cand = Dispatcher()
    cand.load(single_kernel_config(target="dsa_topk", hardware="h200", candidate_id="best", source=src))
    kernels = {"default": Dispatcher(), "best": cand}
    rows = []
    for batch, context in cfg.grid:
        model = DecodeModel(preset, batch=batch, context=context, device="cuda", seed=cfg.seed)
        for d in kernels.values():
            model.step(d)
        times = {k: ([], []) for k in kernels}
        for r in range(6):
            for name in list(kernels) if r % 2 == 0 else list(kernels)[::-1]:
                ms, wall = time_eager(model, kernels[name], 1, 5)
                times[name][0].extend(ms)
                times[name][1].extend(wall)
        for name, (ms, wall) in times.items():
            rows.append(
                {
                    "batch": batch,
                    "context": context,
                    "kernel": name,
                    "step_ms": float(np.median(ms)),
                    "tokens_per_s": batch / (float(np.median(ms)) / 1e3),
                    "ci95": ci_of_median(ms, batch),
                    "wall_tokens_per_s": batch / (float(np.median(wall)) / 1e3),
                    "round_step_ms": ms,
                }
            )
            log(f"eager B={batch} L={context} {name}: {np.median(ms):.3f} ms/step")
        del model
        torch.cuda.empty_cache()
    return rows


def breakdown(cfg, preset, src, log):
    """Where the step's time goes: the step with top-k replaced by a fixed answer (the ceiling any
    top-k kernel can reach), and each top-k alone in a CUDA graph on the step's own logits and on
    randn logits of the same shape (is a gap about the data or about the context?)."""
    cand = Dispatcher()
    cand.load(single_kernel_config(target="dsa_topk", hardware="h200", candidate_id="best", source=src))
    default = Dispatcher()
    rows = []
    for batch, context in cfg.grid:
        model = DecodeModel(preset, batch=batch, context=context, device="cuda", seed=cfg.seed)
        model.step(default)
        torch.cuda.synchronize()
        e2e_logits = model.logits[0].clone()
        fixed = model.indices[0].clone()
        graphs = {
            "default": capture_step(model, default)[0],
            "best": capture_step(model, cand)[0],
            "no_topk": capture_step(model, lambda logits, lengths, k, fixed=fixed: fixed)[0],
        }
        step = time_interleaved({k: g.replay for k, g in graphs.items()}, 10, cfg.round_ms)
        del graphs
        rnd = torch.randn(batch, context, device="cuda")
        iso = {}
        for tag, x in (("e2e", e2e_logits), ("randn", rnd)):
            for name, d in (("default", default), ("best", cand)):
                g, _ = _capture_call(lambda d=d, x=x, n=model.lengths: d(x, n, 2048))
                iso[f"{name}_{tag}"] = g
        t_iso = time_interleaved({k: g.replay for k, g in iso.items()}, 10, 5.0)
        med = {k: float(np.median(v["ms"])) for k, v in {**step, **t_iso}.items()}
        row = {
            "batch": batch,
            "context": context,
            "step_ms": {k: med[k] for k in step},
            "topk_free_ceiling": med["default"] / med["no_topk"],
            "topk_share_default": 1 - med["no_topk"] / med["default"],
            "topk_alone_us": {k: med[k] * 1e3 for k in t_iso},
        }
        rows.append(row)
        log(
            f"breakdown B={batch} L={context}: step default {med['default']:.3f} best {med['best']:.3f} "
            f"no-topk {med['no_topk']:.3f} ms (ceiling {row['topk_free_ceiling']:.3f}x); top-k alone us "
            + ", ".join(f"{k} {v:.1f}" for k, v in row["topk_alone_us"].items())
        )
        del model, iso, e2e_logits, rnd
        torch.cuda.empty_cache()
    return rows


def _capture_call(fn):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
        fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn()
    return g, out


def dispatch_overhead(src, log):
    cand = Dispatcher()
    cand.load(
        {
            **single_kernel_config(target="dsa_topk", hardware="h200", candidate_id="best", source=src),
            "routes": [
                {"lo": 0, "hi": 65536, "kernel": "default"},
                {
                    "lo": 65536,
                    "hi": None,
                    "kernel": single_kernel_config(
                        target="dsa_topk", hardware="h200", candidate_id="best", source=src
                    )["routes"][0]["kernel"],
                },
            ],
        }
    )
    out = {}
    for name, n_ctx in [("default", 8192), ("best", 131072)]:
        x = torch.randn(1, n_ctx, device="cuda")
        lengths = torch.full((1,), n_ctx, dtype=torch.int32, device="cuda")
        direct = cand.kernel_for(n_ctx).forward
        for _ in range(20):
            direct(x, lengths, 2048)
            cand(x, lengths, 2048)
        torch.cuda.synchronize()
        res = {"direct": [], "dispatch": []}
        for r in range(10):
            for which, fn in (
                [("direct", direct), ("dispatch", cand)]
                if r % 2 == 0
                else [("dispatch", cand), ("direct", direct)]
            ):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(200):
                    fn(x, lengths, 2048)
                torch.cuda.synchronize()
                res[which].append((time.perf_counter() - t0) * 1e6 / 200)
        d_us, p_us = float(np.median(res["direct"])), float(np.median(res["dispatch"]))
        t0 = time.perf_counter()
        for _ in range(100000):
            cand.kernel_for(n_ctx)
        host_ns = (time.perf_counter() - t0) * 1e9 / 100000
        out[name] = {
            "n_ctx": n_ctx,
            "eager_direct_us": d_us,
            "eager_dispatch_us": p_us,
            "overhead_us": p_us - d_us,
            "kernel_for_ns": host_ns,
            "direct_rounds_us": res["direct"],
            "dispatch_rounds_us": res["dispatch"],
        }
        log(
            f"dispatch overhead {name} @ n_ctx={n_ctx}: direct {d_us:.2f} us, through dispatch {p_us:.2f} us, "
            f"lookup {host_ns:.0f} ns"
        )
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "h200"))
    ap.add_argument("--skip-eager", action="store_true")
    ap.add_argument("--slot", help="run only this slot's gate (e.g. dsa_indexer_topk_fp8), point by point")
    ap.add_argument("--candidate", help="with --slot: the candidate file (default: the target's best.py)")
    args = ap.parse_args()
    if args.slot:
        return slot_gate(args)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    lines = []

    def log(msg):
        print(msg, flush=True)
        lines.append(msg)

    command = "python bench/e2e_h200.py " + " ".join(sys.argv[1:])
    date = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    gpu = torch.cuda.get_device_name()
    log(f"{date} {gpu} torch {torch.__version__}; smi before: {smi()}")
    best_file = CANDIDATES / "best.py" if (CANDIDATES / "best.py").exists() else CANDIDATES / "seed.py"
    src = best_file.read_text()
    log(f"best top-k kernel: {best_file.relative_to(ROOT)}")
    summary = {"command": command, "date": date, "gpu": gpu, "best_file": str(best_file.relative_to(ROOT))}
    t0 = time.time()
    summary["indexer_rel_err"] = check_indexer(log)
    summary["candidate_check"] = check_candidate(src, log)

    gate = run_gate(target="dsa_topk", candidate_source=src, incumbent_source=None, profile="h200")
    log(
        f"gate: status={gate['status']} findings={[f['code'] for f in gate['findings']]} ({time.time() - t0:.0f} s)"
    )
    (out_dir / "e2e_gate.json").write_text(json.dumps(gate, indent=1))
    cfg = PROFILES["h200"]
    preset = load_preset(cfg.preset)
    model_name = f"{preset['model']}:{preset['name']}"
    records = []
    for p in gate["points"]:
        if "error" in p:
            log(f"point B={p['batch']} L={p['context']}: {p['error']}")
            continue
        for name, kname in (("default", "default"), ("candidate", best_file.stem)):
            ms = p["round_step_ms"][name]
            records.append(
                {
                    "model": model_name,
                    "batch": p["batch"],
                    "context": p["context"],
                    "kernel": kname,
                    "tokens_per_s": p[f"{name}_tok_s"],
                    "ci95": ci_of_median(ms, p["batch"]),
                    "graphs": True,
                    "gpu": gpu,
                    "date": date,
                    "command": command,
                    "step_ms": float(np.median(ms)),
                    "wall_tokens_per_s": p["wall_tok_s"][name],
                }
            )
        log(
            f"graphs B={p['batch']:>2} L={p['context']:>6}: default {p['default_tok_s']:9.1f} tok/s, "
            f"{best_file.stem} {p['candidate_tok_s']:9.1f} tok/s, ratio {p['ratio']:.3f} "
            f"[{p['ci95'][0]:.3f}, {p['ci95'][1]:.3f}] noise {p['noise']:.3f} -> {p['verdict']}; "
            f"parity {p['parity']['ok']} (err {p['parity']['hidden_max_err']:.1e}); kernel seen {p['kernel_evidence']}"
        )
    eager = [] if args.skip_eager else graphs_off(cfg, preset, src, log)
    for r in eager:
        records.append(
            {
                "model": model_name,
                "batch": r["batch"],
                "context": r["context"],
                "kernel": "default" if r["kernel"] == "default" else best_file.stem,
                "tokens_per_s": r["tokens_per_s"],
                "ci95": r["ci95"],
                "graphs": False,
                "gpu": gpu,
                "date": date,
                "command": command,
                "step_ms": r["step_ms"],
                "wall_tokens_per_s": r["wall_tokens_per_s"],
            }
        )
    bd = breakdown(cfg, preset, src, log)
    records.append({"kind": "breakdown", "gpu": gpu, "date": date, "command": command, "points": bd})
    overhead = dispatch_overhead(src, log)
    records.append({"kind": "dispatch_overhead", "gpu": gpu, "date": date, "command": command, **overhead})
    summary["smi_after"] = smi()
    summary["seconds"] = time.time() - t0
    log(f"smi after: {summary['smi_after']}")
    (out_dir / "e2e.json").write_text(json.dumps(records, indent=1))
    (out_dir / "e2e_summary.json").write_text(json.dumps({**summary, "log": lines}, indent=1))
    md = "\n".join(render_md(records, gate, summary)) + "\n"
    (out_dir / "e2e.md").write_text(md)
    print(md)


def slot_gate(args):
    """One slot's gate, largest point first, its JSON rewritten after every point."""
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    cand = Path(args.candidate or ROOT / "gpu_worker" / "candidates" / args.slot / "best.py")
    profile = "h200" if "H200" in torch.cuda.get_device_name() else "h100"
    path = out_dir / f"e2e_gate_{args.slot}.json"
    head = {"command": "python bench/e2e_h200.py " + " ".join(sys.argv[1:]), "candidate_file": str(cand),
            "smi_before": smi()}
    t0 = time.time()

    def on_point(result):
        p = result["points"][-1]
        if "error" in p:
            print(f"B={p['batch']} L={p['context']}: {p['error']}", flush=True)
        else:
            print(
                f"B={p['batch']:>2} L={p['context']:>6}: default {p['default_tok_s']:.1f} candidate "
                f"{p['candidate_tok_s']:.1f} ceiling {p['ceiling_tok_s']:.1f} tok/s; ratio {p['ratio']:.3f} "
                f"[{p['ratio_ci95'][0]:.3f}, {p['ratio_ci95'][1]:.3f}]; parity {p['parity']['ok']}; "
                f"seen {p['kernel_evidence']} ({time.time() - t0:.0f} s)",
                flush=True,
            )
        path.write_text(json.dumps({**head, **result}, indent=1))

    gate = run_gate(target=args.slot, candidate_source=cand.read_text(), incumbent_source=None, profile=profile,
                    largest_first=True, on_point=on_point)
    gate["smi_after"] = smi()
    path.write_text(json.dumps({**head, **gate}, indent=1))
    print(f"gate {gate['status']}: findings {[f['code'] for f in gate['findings']]} ({time.time() - t0:.0f} s)")


def render_md(records, gate, summary):
    md = [
        f"# E2E on {summary['gpu']}: DeepSeek-V3.2-shaped decode step (mini preset)",
        "",
        (
            f"{summary['date']}; `{summary['command']}`; best top-k = `{summary['best_file']}`; "
            f"gate status **{gate['status']}**, grid {gate['grid_hash'][:19]}..."
        ),
        "",
        "| B | L | graphs | default tok/s | best tok/s | ratio [95% CI] | noise | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for p in gate["points"]:
        if "error" in p:
            md.append(f"| {p['batch']} | {p['context']} | on | error: {p['error']} | | | | |")
            continue
        md.append(
            f"| {p['batch']} | {p['context']} | on | {p['default_tok_s']:.0f} | {p['candidate_tok_s']:.0f} | "
            f"{p['ratio']:.3f} [{p['ci95'][0]:.3f}, {p['ci95'][1]:.3f}] | {p['noise']:.3f} | {p['verdict']} |"
        )
    eager = {(r["batch"], r["context"], r["kernel"]): r for r in records if r.get("graphs") is False}
    graphs = {(r["batch"], r["context"], r["kernel"]): r for r in records if r.get("graphs") is True}
    if eager:
        md += [
            "",
            "Graphs off (eager) against graphs on, same step:",
            "",
            "| B | L | kernel | eager tok/s | graph tok/s | graph / eager |",
            "|---|---|---|---|---|---|",
        ]
        for key, r in eager.items():
            g = graphs.get(key)
            md.append(
                f"| {key[0]} | {key[1]} | {key[2]} | {r['tokens_per_s']:.0f} | "
                f"{g['tokens_per_s']:.0f} | {g['tokens_per_s'] / r['tokens_per_s']:.2f}x |"
                if g
                else f"| {key[0]} | {key[1]} | {key[2]} | {r['tokens_per_s']:.0f} | - | - |"
            )
    bd = next((r for r in records if r.get("kind") == "breakdown"), None)
    if bd:
        md += [
            "",
            (
                "Where the time goes (graph step ms; no-topk = top-k replaced by a fixed answer, the ceiling "
                "for any top-k kernel; top-k alone in a CUDA graph, us, on the step's own logits and on randn):"
            ),
            "",
            "| B | L | default ms | best ms | no-topk ms | ceiling | default alone e2e/randn | best alone e2e/randn |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in bd["points"]:
            sm, a = r["step_ms"], r["topk_alone_us"]
            md.append(
                f"| {r['batch']} | {r['context']} | {sm['default']:.3f} | {sm['best']:.3f} | {sm['no_topk']:.3f} | "
                f"{r['topk_free_ceiling']:.2f}x | {a['default_e2e']:.0f} / {a['default_randn']:.0f} | "
                f"{a['best_e2e']:.0f} / {a['best_randn']:.0f} |"
            )
    ov = next((r for r in records if r.get("kind") == "dispatch_overhead"), None)
    if ov:
        md += ["", "Dispatch selection overhead (eager, one top-k call, host timer over 200 calls):", ""]
        for name in ("default", "best"):
            o = ov[name]
            md.append(
                f"- {name} route, n_ctx={o['n_ctx']}: direct {o['eager_direct_us']:.2f} us, through dispatch "
                f"{o['eager_dispatch_us']:.2f} us (overhead {o['overhead_us']:+.2f} us); lookup alone "
                f"{o['kernel_for_ns']:.0f} ns; inside a CUDA graph: 0 (selected at capture)"
            )
    return md


if __name__ == "__main__":
    main()
