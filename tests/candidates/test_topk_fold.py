"""The indexer's best.py holds the kernels of its top-k source (fold_topk.py), a hand edit of that copy is
refused, what dsa_topk/best.py's filter compiles to, and how many compiles an evaluation of each best.py costs.

The filter (KB) must load whole blocks 16 bytes at a time: masking the loads against a row length of unknown
alignment split them into 4-byte loads; with PDL its first logits loads go out before griddepcontrol.wait;
and its slots come per warp (a ballot): docs/kernels.md. Compiled for sm_90a on the CPU (Triton's own ptxas), in a
child process without TRITON_INTERPRET (the interpreter replaces @triton.jit functions). N and C are compiled
without their multiple-of-16 hint, as the kernels leave them unspecialised.
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
consts = {"BLOCK": 1024, "ATOMIC": 1, "HB": 256, "HREG": 0, "PF": 2, "PDL": 1, "WARP": 1, "TIE2": 0}
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


def _fold():
    sys.path.insert(0, str(ROOT / "gpu_worker/candidates"))
    try:
        import fold_topk
    finally:
        sys.path.pop(0)
    return fold_topk


def test_the_indexer_best_holds_the_kernels_of_its_source():
    r = subprocess.run([sys.executable, str(ROOT / "gpu_worker/candidates/fold_topk.py"), "--check"],
                       capture_output=True, text=True, check=False, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    first = (ROOT / "gpu_worker/candidates/dsa_indexer_topk/best.py").read_text().splitlines()[0]
    assert "GENERATED" in first


def test_the_fold_check_sees_a_source_that_moved_on(tmp_path, monkeypatch):
    fold_topk = _fold()
    source = tmp_path / "best.py"
    source.write_text(fold_topk.SOURCE.read_text().replace("KD_WARPS", "KD_WARPZ"))
    target = tmp_path / "indexer_best.py"
    target.write_text(fold_topk.TARGET.read_text())
    monkeypatch.setattr(fold_topk, "SOURCE", source)
    monkeypatch.setattr(fold_topk, "TARGET", target)
    assert fold_topk.main(["--check"]) == 1
    assert fold_topk.main([]) == 0 and "KD_WARPZ" in target.read_text()   # a plain run refolds it
    assert fold_topk.main(["--check"]) == 0


def test_a_hand_edit_of_the_folded_copy_is_refused_not_overwritten(tmp_path, monkeypatch):
    fold_topk = _fold()
    target = tmp_path / "best.py"
    edited = fold_topk.TARGET.read_text().replace("def _kd_place(", "def _kd_place(  ", 1)
    assert edited != fold_topk.TARGET.read_text()
    target.write_text(edited)
    monkeypatch.setattr(fold_topk, "TARGET", target)
    assert fold_topk.main(["--check"]) == 1
    assert fold_topk.main([]) == 1 and target.read_text() == edited       # the edit is still there
    assert fold_topk.main(["--force"]) == 0 and target.read_text() == fold_topk.TARGET.read_text()


def test_the_filter_loads_16_bytes_and_its_first_load_precedes_the_pdl_wait():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, "-c", _PTX, str(ROOT / "gpu_worker/candidates/dsa_topk/best.py")],
                       capture_output=True, text=True, env=env, timeout=600, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["v4"] >= 6                       # two 16-byte loads per block, and four for the two prefetched ones
    assert 0 <= got["first_v4"] < got["wait"] < got["launch"]
    assert got["ballots"] >= 8                  # four per 4-value pack: two packs per block in the loop, two in the tail


def test_an_evaluation_compiles_each_kernel_once_per_stride_class_and_tile():
    """bench/compile_variants.py over the full profile's shapes (seed 1234): with N and C specialised an earlier
    best compiled 20 kernels in verify, one set per class of N and C (docs/kernels.md)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    args = []  # both in one process (counted apart: without --compile nothing is shared)
    for target, rel in (("dsa_topk", "dsa_topk/best.py"), ("dsa_indexer_topk", "dsa_indexer_topk/best.py")):
        args += ["--target", target, "--candidate", str(ROOT / "gpu_worker/candidates" / rel)]
    r = subprocess.run([sys.executable, str(ROOT / "bench/compile_variants.py"), *args],
                       capture_output=True, text=True, env=env, timeout=600, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    got = {f"{target}/best.py": counts for target, counts in json.loads(r.stdout).items()}
    # KA: NS 64 or 128, x 2 strides, x KDIG on (32 rows or more) or off, x TIE2 on (4+ rows of at most 32768)
    # or off, as the shapes reach them: 7 in verify; KB and KD also take TIE2 as a constexpr; KC no longer reads
    # the logits (one compile); the refine's histogram pass compiles once per digit level (LEVEL is a constexpr)
    # and stride class; KD once per early-load width RT. Calls of rows at most SHORT (4096) wide take
    # _short_rows alone, one compile per padded width NP and stride class (and none of the chain's)
    assert got["dsa_topk/best.py"]["verify"] == {"_ka_sample": 7, "_kb_filter": 3, "_kc_select": 1, "_kd_place": 3,
                                                 "_r_hist": 8, "_r_place": 2, "_short_rows": 2, "total": 26}
    assert got["dsa_topk/best.py"]["benchmark"] == {"_ka_sample": 6, "_kb_filter": 2, "_kc_select": 1,
                                                    "_kd_place": 2, "_r_hist": 4, "_r_place": 1, "_short_rows": 1,
                                                    "total": 17}
    # The indexer's verify shapes (gpu_worker/targets/dsa_indexer_topk.py) reach six of those KA variants, and
    # its logits kernel one per (ROWS, N_PER_PROG) pair and stride class that they reach (few rows: ROWS 1, 2
    # or 4 and 1024 keys a program); a count that follows its shapes, not N or C.
    assert got["dsa_indexer_topk/best.py"]["verify"] == {"_ka_sample": 6, "_kb_filter": 3, "_kc_select": 1,
                                                         "_kd_place": 3, "_logits_kernel": 6, "_r_hist": 8,
                                                         "_r_place": 2, "_short_rows": 3, "total": 32}


def test_every_kernel_variant_the_top_k_bests_launch_compiles_for_sm90():
    """The CPU suite runs these kernels in Triton's interpreter, which accepted a refine kernel that Triton's
    compiler refuses (a name rebound to another type inside an `if`); it failed verify on the first GPU it met.
    bench/compile_variants.py --compile compiles every variant a smoke evaluation launches, for sm_90a, here,
    both bests in one process: a top-k kernel the indexer launches with a key dsa_topk's already compiled is
    the same source (the fold), compiled once. The FP8 indexer's best holds the same folded top-k
    (fold_topk.py --check) and is left out: its smoke shapes took 150 s on this CPU."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    args = []
    for target, rel in (("dsa_topk", "dsa_topk/best.py"), ("dsa_indexer_topk", "dsa_indexer_topk/best.py")):
        args += ["--target", target, "--candidate", str(ROOT / "gpu_worker/candidates" / rel)]
    r = subprocess.run([sys.executable, str(ROOT / "bench/compile_variants.py"), "--profile", "smoke", "--compile",
                        *args], capture_output=True, text=True, env=env, timeout=600, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout)
    assert got["dsa_topk"]["verify"]["_r_hist"] >= 4               # the refine's four levels were compiled
    assert got["dsa_indexer_topk"]["verify"]["_logits_kernel"] >= 1
