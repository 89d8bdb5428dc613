"""All-reduce on an H200 pair (issue 9): the one-shot Triton seed against NCCL, 1 KB to 64 MB.

NOT RUN YET. It needs the 2-GPU kind (nvidia-h200-x2), which was withheld when it was written; no
figure in docs/allreduce.md or under bench/results/h200x2/ comes from it until someone runs:

    python bench/allreduce_h200x2.py --out bench/results/h200x2

What it does, in one process that spawns two ranks (gpu_worker/distributed, NVLink multicast forced
off in every process):
  1. measures the peer copy rate GPU1 -> GPU0 (the link ceiling for the roofline; nothing nominal);
  2. evaluate_distributed on the seed, profile "full": verification at 1 KB, an odd 37 KB, 1 MB,
     an odd 3 MB, 64 MB and one random size; then the benchmark over every power of two from 1 KB to
     64 MB, seed and NCCL interleaved in CUDA graphs, medians with bootstrap intervals, A/A noise;
  3. range analysis along "bytes" (loop/ranges.py), routes clamped to the measured range;
  4. a serving config: the seed for [1 KB, crossover), NCCL (default) everywhere else.
Writes allreduce.json (everything, including the full report) and allreduce.md (the curve).
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpu_worker.distributed.env import MULTICAST_OFF, force_multicast_off

force_multicast_off(os.environ)  # before torch creates anything; the ranks force it again

import torch

from gpu_worker.serving_config import ServingConfigError, parse_serving_config
from gpu_worker.distributed import evaluate_distributed
from gpu_worker.distributed.serving import clamp_routes, serving_config
from gpu_worker.targets.allreduce import ALLREDUCE
from loop.ranges import analyze

SEED = ROOT / "gpu_worker" / "candidates" / "allreduce" / "seed.py"


def smi() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=index,name,driver_version,clocks.sm,clocks.mem",
                               "--format=csv,noheader"], capture_output=True, text=True, timeout=30, check=False).stdout
    except Exception as e:  # noqa: BLE001
        return f"nvidia-smi failed: {e}"


def topology() -> str:
    try:
        return subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=30, check=False).stdout
    except Exception as e:  # noqa: BLE001
        return f"nvidia-smi topo failed: {e}"


def peer_copy_bytes_per_s(nbytes: int = 256 << 20, reps: int = 20) -> float:
    """GPU1 -> GPU0 copy rate over the link (median of reps, CUDA events on GPU0)."""
    src = torch.randn(nbytes // 4, device="cuda:1")
    dst = torch.empty(nbytes // 4, device="cuda:0")
    for _ in range(3):
        dst.copy_(src)
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    times = []
    with torch.cuda.device(0):
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            dst.copy_(src)
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) * 1e-3)
    return nbytes / sorted(times)[len(times) // 2]


def curve(report: dict) -> list[dict]:
    rows = []
    for s in (report["stages"].get("benchmark") or {}).get("shapes") or []:
        if "candidate" not in s:
            continue
        rows.append({"bytes": s["shape"]["bytes"], "one_shot_us": s["candidate"]["median_us"],
                     "one_shot_ci95_us": s["candidate"]["ci95_us"], "nccl_us": s["incumbent"]["median_us"],
                     "nccl_ci95_us": s["incumbent"]["ci95_us"], "ratio": s["ratio"], "ratio_ci95": s["ratio_ci95"],
                     "noise_aa": s["noise_aa"], "faster": s["faster"], "link_floor_fraction": s.get("floor_fraction")})
    return rows


def markdown(result: dict) -> str:
    lines = [f"# All-reduce on {result['hardware']} ({result['date']})", "",
             "One-shot Triton seed vs NCCL, bf16, 2 ranks, CUDA graphs, medians (95% bootstrap interval).", "",
             "| bytes | one-shot us | NCCL us | ratio (CI) | faster |", "|---:|---:|---:|---|---|"]
    for r in result["curve"]:
        lines.append(f"| {r['bytes']} | {r['one_shot_us']:.2f} | {r['nccl_us']:.2f} | {r['ratio']:.3f} "
                     f"({r['ratio_ci95'][0]:.3f}-{r['ratio_ci95'][1]:.3f}) | {r['faster']} |")
    lines += ["", f"Crossovers: {result['analysis']['crossovers'] if result.get('analysis') else 'none'}",
              f"Routes: {result.get('routes')}", f"Serving config accepted by dispatch: {result['serving_config_ok']}"]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "h200x2"))
    ap.add_argument("--profile", default="full", choices=["smoke", "full"])
    args = ap.parse_args()
    if torch.cuda.device_count() < 2:
        print(f"needs 2 GPUs, this machine has {torch.cuda.device_count()}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    link = peer_copy_bytes_per_s()
    ceilings = {"bytes_per_s": link, "bf16_flops_per_s": 700e12, "what": "peer copy GPU1->GPU0, measured here"}
    smi_before = smi()
    report = evaluate_distributed({"candidate_id": "allreduce-seed", "target": "allreduce", "profile": args.profile,
                                   "source": SEED.read_text(), "ceilings": ceilings})
    result = {"schema": "ark.bench.allreduce/1", "date": datetime.datetime.now(datetime.UTC).isoformat(),
              "hardware": "h200x2", "env": dict(MULTICAST_OFF), "smi_before": smi_before, "smi_after": smi(),
              "topology": topology(), "link_bytes_per_s": link, "verdict": report.get("verdict"),
              "curve": curve(report), "analysis": None, "routes": None, "serving_config": None,
              "serving_config_ok": False, "serving_config_problems": [], "report": report}
    if report["stages"].get("benchmark", {}).get("status") == "pass":
        analysis = analyze(report, axis="bytes")
        routes = clamp_routes(analysis.to_json()["routes"], *ALLREDUCE.axes["bytes"])
        config = serving_config(routes, target="allreduce", hardware="h200x2", version=1,
                                candidate_id="allreduce-seed", source=SEED.read_text())
        result.update(analysis=analysis.to_json(), routes=routes, serving_config=config)
        try:
            parse_serving_config(config, target="allreduce")
            result["serving_config_ok"] = True
        except ServingConfigError as e:  # until gpu_worker/serving_config.py accepts the "bytes" axis
            result["serving_config_problems"] = e.problems
    (out / "allreduce.json").write_text(json.dumps(result, indent=1, default=str))
    (out / "allreduce.md").write_text(markdown(result))
    print(markdown(result))
    return 0 if report["verdict"].get("status") == "pass" else 1


if __name__ == "__main__":
    sys.exit(main())
