"""Merge the round-2 runs (kernels-dev-round2-run{1,2}.json) into kernels-dev-round2.json and a markdown table.

python bench/kernels/round2_table.py
"""
import json
import os

R = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results", "h200")
runs = {}
for i in (1, 2):
    with open(os.path.join(R, f"kernels-dev-round2-run{i}.json")) as f:
        runs[f"run{i}"] = json.load(f)
with open(os.path.join(R, "kernels-dev-round2.json"), "w") as f:
    json.dump(runs, f, indent=1)
lines = ["# Round 2 top-k on the H200 (bench/kernels/topk_round2.py)", "",
         "Median of 45 CUDA-graph replays (15 for the indexer pipeline), L2 flushed before each, 3 input sets, us.",
         "run1 = 12:00 UTC, run2 = 12:04 UTC, one process each; no A/A interval: differences under ~3-5% are not claimed.",
         "", "| run | target | shape | input | kernel | params | median us | p10 | p90 |", "|---|---|---|---|---|---|---|---|---|"]
prof = []
for run, d in runs.items():
    for r in d["records"]:
        if r.get("kind") == "profile":
            prof.append((run, r))
            continue
        k = r["kernel"]
        inp = ""
        if " [" in k and k.endswith("]"):
            k, inp = k[: k.rindex(" [")], k[k.rindex("[") + 1: -1]
        lines.append(f"| {run} | {r['target']} | {r['shape'][0]}x{r['shape'][1]} | {inp or 'indexer q,k,w'} | {k} | "
                     f"{json.dumps(r['params']) if r['params'] else ''} | {r['median_us']} | {r['p10_us']} | {r['p90_us']} |")
lines += ["", "## Per-kernel split (torch.profiler, 5 eager calls, no L2 flush; indicative), M=64 x 128K", "",
          "| run | input | variant | kernels (us per call) |", "|---|---|---|---|"]
for run, r in prof:
    ks = ", ".join(f"{x['kernel'].split('<')[0][:28]} {x['us_per_call']}" for x in r["kernels"])
    lines.append(f"| {run} | {r['input']} | {r['variant']} | {ks} |")
lines += ["", "Names: in run1 `best` is the v2 file (now best_prev.py); in run2 `best` is the v5 file. Failures: "
          + "; ".join(f"{run}: {len(d['fails'])} ({', '.join(sorted(set(x['what'].split(' check')[0] for x in d['fails'])))})"
                      for run, d in runs.items())]
with open(os.path.join(R, "kernels-dev-round2.md"), "w") as f:
    f.write("\n".join(lines) + "\n")
print("\n".join(lines[-12:]))
