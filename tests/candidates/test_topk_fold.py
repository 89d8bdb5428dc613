"""The top-k kernels that the two best.py files copy (fold_topk.py), what best_v21's filter compiles to, and
how many compiles an evaluation of each best.py costs.

The filter (KB) must load whole blocks 16 bytes at a time: masking the loads against a row length of unknown
alignment split them into 4-byte loads (round 6 of gpu_worker/candidates/NOTES.md); with PDL its first
logits loads go out before griddepcontrol.wait; and its slots come per warp (a ballot, round 7). Compiled for sm_90a on the CPU (Triton's own ptxas), in a
child process without TRITON_INTERPRET (the interpreter replaces @triton.jit functions). N and C are compiled
without their multiple-of-16 hint, as best_v20 and later leave them unspecialised.
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
spec = importlib.util.spec_from_file_location("v20", sys.argv[1])
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
    if a not in ("K", "C", "N"):
        attrs[(i,)] = [["tt.divisibility", 16]]
k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs),
                   target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
ptx = k.asm["ptx"]
v4 = [mm.start() for mm in re.finditer(r"ld\.global\.v4", ptx)]
print(json.dumps({"v4": len(v4), "first_v4": v4[0] if v4 else -1, "wait": ptx.find("griddepcontrol.wait"),
                  "launch": ptx.find("griddepcontrol.launch_dependents"), "ballots": ptx.count("vote.sync.ballot")}))
'''


def test_both_best_files_hold_the_kernels_of_their_sources():
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
    r = subprocess.run([sys.executable, "-c", _PTX, str(ROOT / "gpu_worker/candidates/dsa_topk/best_v21.py")],
                       capture_output=True, text=True, env=env, timeout=600, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["v4"] >= 6                       # two 16-byte loads per block, and four for the two prefetched ones
    assert 0 <= got["first_v4"] < got["wait"] < got["launch"]
    assert got["ballots"] >= 8                  # four per 4-value pack: two packs per block in the loop, two in the tail


def test_an_evaluation_compiles_each_kernel_once_per_stride_class_and_tile():
    """bench/compile_variants.py over the full profile's shapes (seed 1234): best_v19 compiled 20 kernels in
    verify, one set per class of N and C (the verify stage's 66 s on the H200 was mostly compiling)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    got = {}
    for target, rel in (("dsa_topk", "dsa_topk/best.py"), ("dsa_indexer_topk", "dsa_indexer_topk/best.py"),
                        ("dsa_topk", "dsa_topk/best_v19.py")):
        r = subprocess.run([sys.executable, str(ROOT / "bench/compile_variants.py"), "--target", target,
                            "--candidate", str(ROOT / "gpu_worker/candidates" / rel)],
                           capture_output=True, text=True, env=env, timeout=600, check=False)
        assert r.returncode == 0, r.stderr[-3000:]
        got[rel] = json.loads(r.stdout)
    topk = {"_ka_sample": 4, "_kb_filter": 2, "_kc_select": 2, "_kd_place": 2}   # KA: NS 64 or 128, x 2 strides
    assert got["dsa_topk/best.py"]["verify"] == dict(topk, total=10)
    assert got["dsa_topk/best.py"]["benchmark"] == {"_ka_sample": 2, "_kb_filter": 1, "_kc_select": 1,
                                                    "_kd_place": 2, "total": 6}
    assert got["dsa_indexer_topk/best.py"]["verify"] == dict(topk, _logits_kernel=2, total=12)
    assert got["dsa_topk/best_v19.py"]["verify"]["total"] == 20
