"""The top-k kernels that the two best.py files copy (fold_topk.py), and what best_v19's filter compiles to.

The filter (KB) must load whole blocks 16 bytes at a time: masking the loads against a row length of unknown
alignment split them into 4-byte loads (round 6 of gpu_worker/candidates/NOTES.md); with PDL its first
logits loads go out before griddepcontrol.wait; and its slots come per warp (a ballot, round 7). Compiled for sm_90a on the CPU (Triton's own ptxas), in a
child process without TRITON_INTERPRET (the interpreter replaces @triton.jit functions).
"""
import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]

_PTX = r'''
import importlib.util, json, re, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
spec = importlib.util.spec_from_file_location("v19", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
fn = m._kb_filter
consts = {"BLOCK": 1024, "ATOMIC": 1, "HB": 256, "HREG": 0, "PF": 2, "PDL": 1, "WARP": 1}
sig, attrs = {}, {}
for i, a in enumerate(fn.arg_names):
    if a in consts:
        sig[a] = "constexpr"
        continue
    sig[a] = "*fp32" if a == "x_ptr" else ("*i32" if a.endswith("_ptr") else "i32")
    if a not in ("K", "C"):
        attrs[(i,)] = [["tt.divisibility", 16]]
k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs),
                   target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
ptx = k.asm["ptx"]
v4 = [mm.start() for mm in re.finditer(r"ld\.global\.v4", ptx)]
print(json.dumps({"v4": len(v4), "first_v4": v4[0] if v4 else -1, "wait": ptx.find("griddepcontrol.wait"),
                  "launch": ptx.find("griddepcontrol.launch_dependents"), "ballots": ptx.count("vote.sync.ballot")}))
'''


def test_both_best_files_hold_best_v19s_kernels():
    r = subprocess.run([sys.executable, str(ROOT / "gpu_worker/candidates/fold_topk.py"), "--check"],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_fold_check_sees_a_drifted_copy(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "gpu_worker/candidates"))
    try:
        import fold_topk
    finally:
        sys.path.pop(0)
    copy = tmp_path / "best.py"
    copy.write_text(fold_topk.TOPK.read_text().replace("KD_WARPS", "KD_WARPZ", 1))
    monkeypatch.setattr(fold_topk, "TOPK", copy)
    assert fold_topk.main(["--check"]) == 1


def test_the_filter_loads_16_bytes_and_its_first_load_precedes_the_pdl_wait():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, "-c", _PTX, str(ROOT / "gpu_worker/candidates/dsa_topk/best_v19.py")],
                       capture_output=True, text=True, env=env, timeout=600, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["v4"] >= 6                       # two 16-byte loads per block, and four for the two prefetched ones
    assert 0 <= got["first_v4"] < got["wait"] < got["launch"]
    assert got["ballots"] >= 8                  # four per 4-value pack: two packs per block in the loop, two in the tail
