#!/usr/bin/env bash
# Issue 29's figures: ark's whole pipeline (guard, verify, benchmark) on two imported FlashInfer-Bench
# Definitions, through `python -m gpu_worker evaluate --definition` (docs/interop.md):
#   - fused_add_rmsnorm_h4096 with ark's add_rmsnorm seed kernel under the Definition's signature (no eps
#     argument: the Definition fixes 1e-6), against the Definition's reference as the default;
#   - the paged FP8 indexer Definition with the built-in dsa_indexer_topk_fp8 best, its inputs drawn by the
#     declared generators and judged by the built-in check.
# Usage: OUT=dir [PROFILE=smoke|full] bash bench/fib_eval_h200.sh   (needs flashinfer-bench importable)
set -u
OUT=${OUT:?set OUT}; PROFILE=${PROFILE:-full}
DEFS=gpu_worker/fib/definitions
mkdir -p "$OUT"
K="$OUT/rmsnorm_fib_kernel.py"
python3 - "$K" <<'PY'
import sys
from pathlib import Path
seed = Path("gpu_worker/candidates/add_rmsnorm/seed.py").read_text()
head = "def forward(x, residual, weight, eps):"
assert head in seed, "the seed's signature changed"
Path(sys.argv[1]).write_text(seed.replace(head, "def _forward_eps(x, residual, weight, eps):") +
    "\n\ndef forward(hidden_states, residual, weight):\n    return _forward_eps(hidden_states, residual, weight, 1e-6)\n")
PY
run() {  # name, then evaluate's arguments
  local name=$1; shift
  local t0=$(date +%s)
  python3 -m gpu_worker evaluate --profile "$PROFILE" --out "$OUT/$name.json" "$@" > "$OUT/$name.log" 2>&1
  echo "$name rc=$? $(( $(date +%s) - t0 )) s" | tee -a "$OUT/fib_eval.txt"
  tail -25 "$OUT/$name.log" >> "$OUT/fib_eval.txt"
}
run fused_add_rmsnorm_h4096__seed --target fused_add_rmsnorm_h4096 --candidate "$K" \
  --definition $DEFS/fused_add_rmsnorm_h4096.json --range batch_size=1:16384
I=dsa_topk_indexer_fp8_h64_d128_topk2048_ps64
run ${I}__best --target $I --candidate gpu_worker/candidates/dsa_indexer_topk_fp8/best.py \
  --definition $DEFS/$I.json --inputs $DEFS/$I.inputs.json \
  --range batch_size=1:64 --range num_pages=2048:8192 --range max_num_pages=64:2048
