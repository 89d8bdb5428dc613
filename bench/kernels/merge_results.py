"""Merge the raw dev_bench outputs into bench/results/h200/kernels-dev.json and .md.

Run 1 (11:26 UTC) timed the first versions of the top-k kernels (2048-bin digits); run 2 (11:33 UTC)
timed the current ones. Kernel names are qualified here so that each record names the version it
measured. Raw files: bench/results/h200/kernels-dev-run{1,2}.json, logs bench/kernels/run{1,2}.log.
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
RES = os.path.join(os.path.dirname(HERE), "results", "h200")

RENAME_RUN1 = {
    ("dsa_topk", "seed"): "dsa_topk/seed v1 (1 CTA/row, 3x2048-bin passes)",
    ("dsa_topk", "seed(sweep)"): "dsa_topk/seed v1 (sweep)",
    ("dsa_topk", "best"): "dsa_topk/best_v1_hist2048",
    ("dsa_topk", "best(sweep)"): "dsa_topk/best_v1_hist2048 (sweep)",
    ("dsa_indexer_topk", "seed"): "dsa_indexer_topk/seed v1 (2048-bin merge)",
    ("dsa_indexer_topk", "seed(sweep)"): "dsa_indexer_topk/seed v1 (sweep)",
    ("dsa_indexer_topk", "best"): "dsa_indexer_topk/best v1 (logits + topk v1)",
    ("dsa_indexer_topk", "best(sweep)"): "dsa_indexer_topk/best v1 (sweep)",
}


def qualify(r, run):
    t, k = r["target"], r["kernel"]
    if run == 1 and (t, k) in RENAME_RUN1:
        return RENAME_RUN1[(t, k)]
    if k.startswith("torch"):
        return k
    if t == "add_rmsnorm":
        return f"add_rmsnorm/{k}"
    return f"{t}/{k}"


def main():
    out = []
    infos = []
    for run in (1, 2):
        d = json.load(open(os.path.join(RES, f"kernels-dev-run{run}.json")))
        infos.append(d["info"])
        cmd = d["records"][0]["command"] if d["records"] else ""
        for r in d["records"]:
            r = dict(r)
            r["kernel"] = qualify(r, run)
            r["run"] = run
            r["command"] = ("python bench/kernels/dev_bench.py --out $OUT" if run == 1 else
                            "python bench/kernels/dev_bench.py --out $OUT --only topk,indexer")
            out.append(r)
    json.dump(out, open(os.path.join(RES, "kernels-dev.json"), "w"), indent=1)
    lines = ["# Candidate kernels on the H200 (dev measurements)", "",
             "CUDA-graph replays timed one by one with CUDA events, 512 MB L2 flush before each replay, 3 input "
             "sets interleaved, median (p10-p90) in microseconds. Script: `bench/kernels/dev_bench.py`; raw "
             "files `kernels-dev-run1.json`, `kernels-dev-run2.json`. One process per run, no A/A "
             "interval: treat differences under ~3% as noise. "
             f"GPU {infos[0]['gpu']}, torch {infos[0]['torch']}, triton {infos[0].get('triton')}; clocks "
             f"after: {infos[0]['clocks_after']} (run 1), {infos[1]['clocks_after']} (run 2).", "",
             "## Best per target (current files)", "",
             "| target | shape | best kernel (params in file) | median us | baseline | target |",
             "|---|---|---|---|---|---|",
             "| add_rmsnorm | 16384 x 8192 | add_rmsnorm/seed_cute (CuTe DSL) | 261.3 (4.11 TB/s, 97% of copy) | torch 390.1 | <= 316 (80%): met |",
             "| add_rmsnorm | 16384 x 8192 | add_rmsnorm/seed (Triton) | 265.7 (4.04 TB/s, 95%; ties seed_cute within noise, 1.7%) | torch 390.1 | met |",
             "| dsa_topk | 64 x 131072, k=2048 | dsa_topk/best (v2, sweep params) | 115.3 | torch.topk 175.9 | <= 40: missed |",
             "| dsa_topk | 4 x 131072, k=2048 | dsa_topk/best (v2, sweep params) | 35.1 | torch.topk 86.7 | <= 30: missed |",
             "| dsa_indexer_topk | 64 x 131072, k=2048 | dsa_indexer_topk/best (ROWS=4, BLOCK_N=64) | 705.4 | torch 4562.9 | <= 600: missed |",
             "| dsa_indexer_topk | 64 x 131072, k=2048 | dsa_indexer_topk/seed (chunked, running top-k) | 1044.0 | | thesis variant |",
             "",
             "Sweep winners come from the same process as the sweep (no fresh-process re-confirmation). "
             "best_v3 files are not measured.", "",
             "## All records", "",
             "| run | target | shape | kernel | params | median us | p10-p90 | extra |",
             "|---|---|---|---|---|---|---|---|"]
    for r in out:
        extra = ""
        if "TBps" in r:
            extra = f"{r['TBps']} TB/s"
        if "tflops" in r:
            extra = f"{r['tflops']} TFLOP/s"
        p = json.dumps(r["params"]) if r["params"] else ""
        lines.append(f"| {r['run']} | {r['target']} | {r['shape']} | {r['kernel']} | `{p}` | {r['median_us']} | "
                     f"{r['p10_us']}-{r['p90_us']} | {extra} |")
    open(os.path.join(RES, "kernels-dev.md"), "w").write("\n".join(lines) + "\n")
    print(len(out), "records")


if __name__ == "__main__":
    main()
