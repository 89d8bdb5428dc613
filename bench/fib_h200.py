"""FlashInfer-Bench on a GPU (docs/interop.md): per region of a promotion, one call routed by
`flashinfer_bench.apply` against ark's choice for that cell (same outputs, times); and FlashInfer-Bench's
timer against triton's do_bench_cudagraph on the same solution. Usage: python bench/fib_h200.py OUT.json"""

# ruff: noqa: B023 - every closure is timed inside the iteration that made it
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path

import torch
import triton.testing
from flashinfer_bench import ApplyConfig, TraceSet
from flashinfer_bench.apply.runtime import ApplyRuntime
from flashinfer_bench.bench.timing import do_bench

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from gpu_worker.fib.reader import build_document
from gpu_worker.fib.target import target_from_document
from gpu_worker.fib.traceset import promotion_traceset
from gpu_worker.serving_config import parse_serving_config  # noqa: F401

DEF = "fused_add_rmsnorm_h4096"
CELLS = [1, 16, 128, 1024, 4096, 16384]
PROMOTED = [1, 1025]  # batch_size [1, 1025): the promoted region; the rest stays the default
SEED = (ROOT / "gpu_worker/candidates/add_rmsnorm/seed.py").read_text()
KERNEL = SEED.replace("def forward(x, residual, weight, eps):", "def _forward_eps(x, residual, weight, eps):") + (
    "\n\ndef forward(hidden_states, residual, weight):\n    return _forward_eps(hidden_states, residual, weight, 1e-6)\n")


def main(out: str) -> None:
    import hashlib

    os.environ.setdefault("FIB_CACHE_PATH", tempfile.mkdtemp(prefix="fib-cache-"))
    lines = "\n".join(json.dumps({"definition": DEF, "workload": {"axes": {"batch_size": b}, "inputs": {}, "uuid": str(b)}})
                      for b in CELLS)
    doc = build_document((ROOT / f"gpu_worker/fib/definitions/{DEF}.json").read_text(), lines, ["batch_size=1:16384"])
    target = target_from_document(doc)
    config = {"schema": "ark.serving/1", "target": DEF, "hardware": "h200", "version": 1, "axes": ["batch_size"],
              "fallback": "default", "routes": [{"bounds": {"batch_size": PROMOTED}, "kernel": {
                  "candidate_id": "seed", "params": {}, "source": KERNEL,
                  "source_hash": "sha256:" + hashlib.sha256(KERNEL.encode()).hexdigest()}}]}
    ts_dir = Path(tempfile.mkdtemp(prefix="fib-ts-"))
    served = promotion_traceset({"document": doc, "serving_config": config}, ts_dir)["served"]
    kernel_path = ts_dir.parent / "ark_fib_kernel.py"  # Triton's jit reads its kernels' source from a file
    kernel_path.write_text(KERNEL)
    spec = importlib.util.spec_from_file_location("ark_fib_kernel", kernel_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kernel = module.forward
    rows = []
    with ApplyRuntime(TraceSet.from_path(str(ts_dir)), ApplyConfig(on_miss_policy="fallback_only", aot_ratio=0.0)) as rt:
        for b in CELLS:
            inputs = target.make_inputs({"batch_size": b}, b, "cuda")
            promoted = PROMOTED[0] <= b < PROMOTED[1]
            ark_choice = kernel if promoted else target.baseline
            routed = lambda: rt.dispatch(DEF, inputs, {}, target.baseline)
            same = all(torch.equal(x, y) for x, y in zip(routed(), ark_choice(*inputs)))
            row = {"batch_size": b, "region": "promoted" if promoted else "default", "outputs_equal": same,
                   "apply_us": 1000 * triton.testing.do_bench(routed, rep=100, return_mode="mean"),
                   "ark_choice_us": 1000 * triton.testing.do_bench(lambda: ark_choice(*inputs), rep=100, return_mode="mean")}
            for name, fn in (("kernel", kernel), ("default", target.baseline)):
                row[f"{name}_cudagraph_us"] = 1000 * triton.testing.do_bench_cudagraph(lambda: fn(*inputs), rep=100, return_mode="mean")
                row[f"{name}_fib_us"] = 1000 * do_bench(lambda args: fn(*args), warmup=10, rep=100, return_mode="mean",
                                                       setup=lambda: [t.clone() for t in inputs])
            row["ratio_cudagraph"] = row["kernel_cudagraph_us"] / row["default_cudagraph_us"]
            row["ratio_fib"] = row["kernel_fib_us"] / row["default_fib_us"]
            rows.append(row)
            print(json.dumps(row), flush=True)
    Path(out).write_text(json.dumps({"definition": DEF, "device": torch.cuda.get_device_name(), "served": served,
                                     "torch": torch.__version__, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
