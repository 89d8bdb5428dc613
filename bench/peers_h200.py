"""The best public peers beside ark's kernels on the GPU, on the same inputs: FlashInfer's top-k beside the
dsa_topk best (docs/kernels.md, "Against FlashInfer"), DeepGEMM's paged FP8 logits beside the FP8 indexer's
(docs/kernels.md, "Against DeepGEMM"; the second part below).

One process times, per dsa_topk benchmark shape, on the SAME fresh input sets: the target's default (masked
torch.topk), ark's best (gpu_worker/candidates/dsa_topk/best.py) and FlashInfer 0.7.4's
`flashinfer.topk.top_k_ragged_transform` (offsets zero: dsa_topk's contract), each backend of it that can be
forced. The timing is the benchmark's own (gpu_worker/pipeline/bench_child.py): one CUDA graph per kernel and
shape, each input set copied into every kernel's captured buffers, outputs poisoned, L2 flushed, one replay per
event pair, kernels in a rotating order; statistics from gpu_worker/pipeline/stats.py. Before a FlashInfer
backend is timed it must return the exact top-k set (the target's own check) on the target's verification
shapes; every timed replay of every kernel is checked again. A backend that fails is reported wrong, not timed.

Two steps:
  prepare (this machine, needs the wheels through pip and nvcc 13 for --build):
      python bench/peers_h200.py prepare [--cub] [--build]
    makes var/fi/: a trimmed FlashInfer (Python files, headers, the top-k sources; curand headers, which its
    sampling header includes), apache-tvm-ffi for the device's Python (cp312), and with --build the top-k
    module compiled for sm_90a here (var/fi/topk.so), so the device spends no time compiling it.
    cub_topk.cu (CUB's batched top-k) is replaced by stubs that raise, or with --cub by a copy cut to the one
    instantiation dsa_topk needs (float32, no tie-break, whole rows): the full file instantiates every dtype,
    tie-break mode and entry point and does not compile within one device call.
  run (the device, var/fi carried):
      python3 bench/peers_h200.py run --out $OUT/peers.json
    loads var/fi/topk.so when it is there and loads, else JIT-builds the module as FlashInfer does (cached
    under $FLASHINFER_WORKSPACE_BASE, default ~, so a second call on a warm machine reuses it).

The FP8 indexer (dsa_indexer_topk_fp8) against DeepGEMM's `fp8_paged_mqa_logits`, the public kernel that
serving engines call for DeepSeek-V3.2's indexer (logits only; the engine runs a top-k after it):
  prepare-deepgemm (this machine): python bench/peers_h200.py prepare-deepgemm --src DEEPGEMM_CHECKOUT
    packs var/dg/src.tgz from a DeepGEMM checkout with its submodules (git clone --recursive): the package,
    its C++ sources and the CUTLASS/CuTe and fmt headers its build and its JIT need. Nothing is compiled here:
    its extension links the device's CUDA torch.
  run (the device, var/dg carried):
      python3 bench/peers_h200.py run --target dsa_indexer_topk_fp8 --out $OUT/fp8_peers.json
    builds the extension with torch.utils.cpp_extension (cached under $DG_BUILD_DIR, default ~/dg-build) and
    times, on the same fresh input sets: the target's default, ark's best, DeepGEMM's logits + masked
    torch.topk, DeepGEMM's logits + ark's dsa_topk best (both mapped to global token ids through the block
    table, as the contract asks), and DeepGEMM's logits alone (not an answer: unchecked, for the split).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
FI_DIR = ROOT / "var" / "fi"
DG_DIR = ROOT / "var" / "dg"
FI_VERSION = "0.7.4"
TVM_FFI_VERSION = "0.1.15.post2"  # flashinfer-python 0.7.4 asks for apache-tvm-ffi>=0.1.11,<0.2
CURAND = "nvidia-curand==10.4.5.25"
ARCH = "9.0a"
DEVICE = "cuda"  # a CPU smoke run of the timing loop swaps in "cpu" with bench_child's fake capture
TOPK_SOURCES = ("topk.cu", "cub_topk.cu", "flashinfer_topk_binding.cu", "flashinfer_fast_topk_clusters_binding.cu")

# FlashInfer backends timed. env: FLASHINFER_TOPK_ALGO at capture (read by its Python and C++ dispatchers);
# "filtered" / "multi_cta" force the native radix kernels, "cub" CUB's DeviceBatchedTopK; None leaves the choice
# to FlashInfer (under graph capture its dispatcher picks CUB for these shapes). graph_safe: dsa_graph_safe=True,
# its documented mode for CUDA graphs (the filtered kernel with unvectorised loads).
FI_BACKENDS = {
    "fi_filtered": {"env": "filtered", "graph_safe": False, "cub": False},
    "fi_filtered_graph_safe": {"env": "filtered", "graph_safe": True, "cub": False},
    "fi_multi_cta": {"env": "multi_cta", "graph_safe": False, "cub": False},
    "fi_cub": {"env": "cub", "graph_safe": False, "cub": True},
    "fi_auto": {"env": None, "graph_safe": False, "cub": True},
}


# ----------------------------------------------------------------------------------------------- prepare

def _pip_download(spec: str, dest: Path, python_version: str | None = None) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    name = re.split(r"[=<>]", spec)[0].replace("-", "_")
    found = sorted(p for p in dest.glob("*.whl") if p.name.lower().startswith(name.lower()))
    if found:
        return found[-1]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(dest), spec]
    if python_version:
        cmd += ["--python-version", python_version, "--implementation", "cp"]
        for plat in ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
                     "manylinux2014_x86_64"):
            cmd += ["--platform", plat]
    subprocess.run(cmd, check=True)
    return max(p for p in dest.glob("*.whl") if p.name.lower().startswith(name.lower()))


def _cut_body(text: str, signature: str, body: str) -> str:
    """Replace the body of the function whose definition starts with `signature` (braces matched)."""
    start = text.index(signature)
    open_ = text.index("{", text.index(")", start))
    depth, i = 0, open_
    while True:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            break
        i += 1
    return text[:open_] + "{\n  " + body + "\n}" + text[i + 1:]


CUB_NOT_BUILT = 'TVM_FFI_ICHECK(false) << "this peer build of FlashInfer has no CUB path here";'


def cub_fp32_ragged_only(src: str) -> str:
    """cub_topk.cu cut to the ragged transform on float32 rows without tie-break and without row_starts: the
    only CUB instantiations a dsa_topk call reaches. The other entry points raise."""
    src = src.replace('#include "tvm_ffi_utils.h"', '#include "tvm_ffi_utils.h"\n'
                      "#undef DISPATCH_DLPACK_DTYPE_TO_CTYPE_FP32_FP16\n"
                      "#define DISPATCH_DLPACK_DTYPE_TO_CTYPE_FP32_FP16(dlpack_dtype, c_type, ...) \\\n"
                      "  [&]() -> bool { TVM_FFI_ICHECK(encode_dlpack_dtype(dlpack_dtype) == float32_code) \\\n"
                      '      << "this peer build of CUB top-k is float32 only"; using c_type = float; \\\n'
                      "      return __VA_ARGS__(); }()", 1)
    tie = re.compile(r"  if \(tie_break == 1\) \{.*?\} else \{\n", re.DOTALL)
    assert tie.search(src), "cub_topk.cu: tie-break dispatch not found"
    src = tie.sub("  if (tie_break != 0) {\n    return cudaErrorNotSupported;\n  } else {\n", src, count=1)
    starts = re.compile(r"  if \(row_starts != nullptr\) \{\n    auto d_keys_in =.*?\n  \}\n", re.DOTALL)
    assert starts.search(src), "cub_topk.cu: row_starts branch not found"
    src = starts.sub("  if (row_starts != nullptr) {\n    return cudaErrorNotSupported;\n  }\n", src, count=1)
    for sig in ("void cub_topk_page_table_transform(", "void cub_topk(TensorView"):
        src = _cut_body(src, sig, CUB_NOT_BUILT)
    for sig in ("int64_t cub_topk_page_table_transform_workspace_size(", "int64_t cub_topk_workspace_size("):
        src = _cut_body(src, sig, CUB_NOT_BUILT + "\n  return 0;")
    return src


def cub_stubs(binding: str) -> str:
    """A cub_topk.cu with the six functions flashinfer_topk_binding.cu declares, each raising."""
    decls = re.findall(r"^((?:void|int64_t) (cub_topk\w*)\(.*?\);)", binding, re.DOTALL | re.MULTILINE)
    assert len(decls) == 6, f"expected 6 CUB declarations in the binding, found {len(decls)}"
    out = ['#include "tvm_ffi_utils.h"', "using tvm::ffi::Optional;", ""]
    for decl, _ in decls:
        ret = "\n  return 0;" if decl.startswith("int64_t") else ""
        out.append(decl[:-1] + " {\n  " + CUB_NOT_BUILT + ret + "\n}\n")
    return "\n".join(out)


def _write(path: Path, data: bytes) -> None:
    """Write only what changed: ninja then keeps the objects built from unchanged sources and headers."""
    if path.exists() and path.read_bytes() == data:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def prepare(args) -> None:
    wheels = FI_DIR / "wheels"
    fi_whl = _pip_download(f"flashinfer-python=={FI_VERSION}", wheels)
    ffi_whl = _pip_download(f"apache-tvm-ffi=={TVM_FFI_VERSION}", wheels / "cp312", "312")
    curand_whl = _pip_download(CURAND, wheels / "curand", "312")
    pkg = FI_DIR / "pkg"
    with zipfile.ZipFile(fi_whl) as z:
        keep = re.compile(r"flashinfer/([^/]+\.py|jit/.*|trace/.*|data/(include|cccl|spdlog)/.*|data/csrc/[^/]+\.(h|cuh))$")
        names = [n for n in z.namelist() if keep.match(n) and not n.endswith("/")]
        names += [f"flashinfer/data/csrc/{s}" for s in TOPK_SOURCES]
        for n in names:
            _write(pkg / n, z.read(n))
        # the package's own __init__ imports every backend; topk needs none of them
        _write(pkg / "flashinfer/__init__.py", b'"""Trimmed FlashInfer for bench/peers_h200.py: only flashinfer.topk."""\n')
        csrc = pkg / "flashinfer/data/csrc"
        cub = z.read("flashinfer/data/csrc/cub_topk.cu").decode()
        binding = z.read("flashinfer/data/csrc/flashinfer_topk_binding.cu").decode()
        _write(csrc / "cub_topk.cu", (cub_fp32_ragged_only(cub) if args.cub else cub_stubs(binding)).encode())
    with zipfile.ZipFile(curand_whl) as z:
        for n in z.namelist():
            if re.match(r"nvidia/cu\d+/include/curand[^/]*\.h$", n):
                _write(pkg / "flashinfer/data/include" / Path(n).name, z.read(n))
    site = FI_DIR / "site312"
    shutil.rmtree(site, ignore_errors=True)
    with zipfile.ZipFile(ffi_whl) as z:
        z.extractall(site)
    (FI_DIR / "BUILD.json").write_text(json.dumps({"flashinfer": FI_VERSION, "apache_tvm_ffi": TVM_FFI_VERSION,
                                                   "curand_headers": CURAND, "cub": "fp32-ragged" if args.cub else "stub",
                                                   "arch": ARCH}, indent=1) + "\n")
    print(f"var/fi/pkg and var/fi/site312 ready (CUB: {'float32 ragged only' if args.cub else 'stubs'})")
    if args.build:
        build_here(args)
    for name in ("pkg", "site312"):  # what the device call carries: two archives, the module, BUILD.json
        with tarfile.open(FI_DIR / f"{name}.tgz", "w:gz") as tar:
            tar.add(FI_DIR / name, arcname=name)
    print("carry: " + " ".join(f"var/fi/{n}" for n in ("pkg.tgz", "site312.tgz", "BUILD.json", "topk.so")
                               if (FI_DIR / n).exists()))


def build_here(args) -> None:
    """Compile the top-k module with this machine's nvcc through FlashInfer's own JIT spec (its ninja file),
    under a host-Python copy of apache-tvm-ffi (only its headers reach the compiled module)."""
    host = FI_DIR / f"site{sys.version_info.major}{sys.version_info.minor}"
    whl = _pip_download(f"apache-tvm-ffi=={TVM_FFI_VERSION}", FI_DIR / "wheels" / host.name,
                        f"{sys.version_info.major}{sys.version_info.minor}")
    if not host.exists():
        with zipfile.ZipFile(whl) as z:
            z.extractall(host)
    # The link asks for -lcudart -lcuda from FlashInfer's CUDA home: this machine has the toolkit's cudart but
    # no driver, so an empty libcuda with the driver's soname stands in (the device's driver is loaded there).
    stubs = FI_DIR / "stubs"
    if not (stubs / "libcuda.so").exists():
        stubs.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cc", "-shared", "-x", "c", "/dev/null", "-Wl,-soname,libcuda.so.1", "-o",
                        str(stubs / "libcuda.so")], check=True)
    cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    env = dict(os.environ, PYTHONPATH=f"{FI_DIR / 'pkg'}:{host}", FLASHINFER_CUDA_ARCH_LIST=ARCH,
               FLASHINFER_WORKSPACE_BASE=str(FI_DIR / "ws"), MAX_JOBS=str(args.jobs),
               LIBRARY_PATH=f"{cuda}/lib64:{stubs}")
    code = ("import flashinfer.topk as t, shutil; s = t.gen_topk_module(); s.build(verbose=True); "
            f"shutil.copy(s.jit_library_path, {str(FI_DIR / 'topk.so')!r}); print(s.jit_library_path)")
    t0 = time.time()
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    print(f"built var/fi/topk.so in {time.time() - t0:.0f} s")


def prepare_deepgemm(args) -> None:
    """var/dg/src.tgz: what building DeepGEMM's extension and running its JIT need, from a checkout."""
    src = Path(args.src).resolve()
    need = ["csrc/python_api.cpp", "deep_gemm/__init__.py", "deep_gemm/include/deep_gemm",
            "third-party/cutlass/include/cute", "third-party/cutlass/include/cutlass", "third-party/fmt/include/fmt"]
    missing = [n for n in need if not (src / n).exists()]
    if missing:
        raise SystemExit(f"{src} is not a DeepGEMM checkout with its submodules (git clone --recursive): "
                         f"missing {', '.join(missing)}")
    commit = args.commit
    if not commit:
        got = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True,
                             check=False)
        commit = got.stdout.strip() if got.returncode == 0 else "unknown"

    def no_cache(info):
        return None if "__pycache__" in info.name else info

    DG_DIR.mkdir(parents=True, exist_ok=True)
    with tarfile.open(DG_DIR / "src.tgz", "w:gz") as tar:
        tar.add(src / "csrc", arcname="src/csrc", filter=no_cache)
        tar.add(src / "deep_gemm", arcname="src/deep_gemm", filter=no_cache)
        for d in ("cute", "cutlass"):  # the JIT reads them beside deep_gemm's own headers, as its wheel has them
            tar.add(src / "third-party/cutlass/include" / d, arcname=f"src/deep_gemm/include/{d}")
        tar.add(src / "third-party/fmt/include", arcname="src/fmt/include")
    (DG_DIR / "BUILD.json").write_text(json.dumps({"deepgemm": commit, "arch": ARCH}, indent=1) + "\n")
    size = (DG_DIR / "src.tgz").stat().st_size / 2**20
    print(f"var/dg/src.tgz ({size:.1f} MiB) from DeepGEMM {commit}; carry: var/dg")


# ----------------------------------------------------------------------------------------------- run

def load_flashinfer(fi_dir: Path, log) -> tuple:
    """Import the trimmed flashinfer.topk; load var/fi/topk.so, or build the module here when that fails."""
    for name in ("pkg", "site312"):
        if not (fi_dir / name).exists():
            with tarfile.open(fi_dir / f"{name}.tgz") as tar:
                tar.extractall(fi_dir, filter="data")
    for p in (fi_dir / "site312", fi_dir / "pkg"):
        sys.path.insert(0, str(p))
    os.environ.setdefault("FLASHINFER_CUDA_ARCH_LIST", ARCH)
    os.environ.setdefault("FLASHINFER_WORKSPACE_BASE", str(Path.home()))
    os.environ.setdefault("MAX_JOBS", "16")
    import flashinfer.topk as fi_topk
    import tvm_ffi

    build = json.loads((fi_dir / "BUILD.json").read_text())
    prebuilt = fi_dir / "topk.so"
    how = None
    if prebuilt.exists():
        try:
            module = tvm_ffi.load_module(str(prebuilt))
            fi_topk.gen_topk_module = lambda: SimpleNamespace(build_and_load=lambda: module)
            how = "prebuilt var/fi/topk.so"
        except Exception as e:  # noqa: BLE001 - another libstdc++, say: then build it here instead
            log(f"prebuilt topk.so did not load ({type(e).__name__}: {e}); building on this machine")
    t0 = time.time()
    fi_topk.get_topk_module()  # registers FlashInfer's ops over the module (and builds it if not prebuilt)
    if how is None:
        how = f"JIT build on this machine, {time.time() - t0:.0f} s (cached under $FLASHINFER_WORKSPACE_BASE)"
    build["module"] = how
    return fi_topk, build


def fi_kernel(fi_topk, backend: dict):
    """dsa_topk's signature over top_k_ragged_transform; the backend's env is set at each call, so the
    kernel captured in a graph is the one that backend dispatches to."""
    import torch

    zeros = {}

    def forward(logits, lengths, k):
        M = logits.shape[0]
        if M not in zeros or zeros[M].device != logits.device:
            zeros[M] = torch.zeros(M, dtype=torch.int32, device=logits.device)
        if backend["env"] is None:
            os.environ.pop("FLASHINFER_TOPK_ALGO", None)
        else:
            os.environ["FLASHINFER_TOPK_ALGO"] = backend["env"]
        return fi_topk.top_k_ragged_transform(logits, zeros[M], lengths, k, dsa_graph_safe=backend["graph_safe"])
    return forward


def load_deepgemm(dg_dir: Path, log):
    """Build DeepGEMM's extension against this machine's torch (a no-op when its build folder is current)
    and import the package over it."""
    import torch
    from torch.utils import cpp_extension

    src = dg_dir / "src"
    if not src.exists():
        with tarfile.open(dg_dir / "src.tgz") as tar:
            tar.extractall(dg_dir, filter="data")
    cuda = cpp_extension.CUDA_HOME
    build_dir = Path(os.environ.get("DG_BUILD_DIR", Path.home() / "dg-build"))
    build_dir.mkdir(parents=True, exist_ok=True)
    # The system compiler, whose libstdc++ is the one this process loads. The lent GPU host's $CXX is another
    # GCC (/opt/gcc): built with it, the module's std::regex (DeepGEMM's JIT parses includes with it) crashed
    # on its first call, as did a three-line std::regex extension; built with the system g++ both ran.
    os.environ["CXX"] = os.environ.get("DG_CXX", "c++")
    t0 = time.time()
    module = cpp_extension.load(
        name="_C", sources=[str(src / "csrc/python_api.cpp")], build_directory=str(build_dir), with_cuda=True,
        extra_include_paths=[f"{cuda}/include", f"{cuda}/include/cccl", str(src / "deep_gemm/include"),
                             str(src / "fmt/include")],
        extra_cflags=["-O3", "-Wno-psabi", "-Wno-deprecated-declarations"],
        extra_ldflags=[f"-L{cuda}/lib64", "-lcudart", "-lnvrtc"])
    build = json.loads((dg_dir / "BUILD.json").read_text())
    build["module"] = (f"built with torch.utils.cpp_extension ({os.environ['CXX']}) in {time.time() - t0:.0f} s "
                       f"({build_dir})")
    sys.modules["deep_gemm._C"] = module  # the package's `from . import _C` finds the module built here
    sys.path.insert(0, str(src))
    import deep_gemm
    log(f"DeepGEMM {build['deepgemm']}: {build['module']}; torch {torch.__version__}")
    return deep_gemm, build


def paged_answer(positions, lengths, block_table, page: int):
    """Positions in a row's logical sequence (-1 or >= its length: no token) -> the contract's global token
    ids, page id x page + offset, and -1 in the slots past a row's length."""
    import torch
    pos = positions.long()
    valid = (pos >= 0) & (pos < lengths.long()[:, None])
    safe = torch.where(valid, pos, torch.zeros_like(pos))
    gid = block_table.long().gather(1, safe // page) * page + safe % page
    return torch.where(valid, gid, torch.full_like(gid, -1)).to(torch.int32)


def fp8_peer_kernels(dg, topk_best) -> dict:
    """dsa_indexer_topk_fp8's signature over DeepGEMM's paged logits: the logits alone (not an answer), then
    + masked torch.topk (dsa_topk's default kernel) and + ark's dsa_topk best (both take per-row lengths), each
    mapped through the block table. q [B, 64, 128] is DeepGEMM's [B, next_n = 1, 64, 128]; the int8 cache its uint8 one; the context
    lengths its 2-D [B, next_n] form (the only one it takes; it leaves the logits past a row's length unwritten,
    so the top-k must respect the lengths)."""
    import torch

    from gpu_worker.targets import _topk_common as tc
    from gpu_worker.targets import dsa_indexer_topk_fp8 as t
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count

    def logits(q, cache, weights, lengths, block_table):
        B = q.shape[0]
        ctx = lengths.view(B, 1)
        meta = dg.get_paged_mqa_logits_metadata(ctx, t.PAGE, num_sms)
        return dg.fp8_paged_mqa_logits(q.view(B, 1, t.HEADS, t.HEAD_DIM), cache.view(torch.uint8), weights, ctx,
                                       block_table, meta, block_table.shape[1] * t.PAGE, False)

    def with_torch_topk(q, cache, weights, lengths, block_table):
        lg = logits(q, cache, weights, lengths, block_table)
        return paged_answer(tc.torch_masked_topk(lg, lengths, t.K), lengths, block_table, t.PAGE)

    def with_ark_topk(q, cache, weights, lengths, block_table):
        lg = logits(q, cache, weights, lengths, block_table)
        return paged_answer(topk_best(lg, lengths, t.K), lengths, block_table, t.PAGE)

    return {"dg_logits_only": logits, "dg+torch_topk": with_torch_topk, "dg+ark_topk": with_ark_topk}


def verify(target, fn, seed: int) -> tuple[bool, str]:
    """The target's verification shapes plus its GPU shapes, one fresh input set each, the target's check."""
    from gpu_worker.pipeline import bench_child as bc
    from gpu_worker.pipeline.protocol import derive_seed
    shapes = list(target.verification_shapes("full")) + list(target.gpu_shapes)
    for i, shape in enumerate(shapes):
        inputs = target.make_inputs(shape, derive_seed(seed, "peer-verify", i), DEVICE)
        try:
            out = fn(*inputs)
            bc._sync()
        except Exception as e:  # noqa: BLE001 - a backend that raises is reported, not timed
            return False, f"shape {shape}: raised {type(e).__name__}: {str(e)[:300]}"
        ok, _, message = target.check(out, inputs, target.reference(inputs))
        if not ok:
            return False, f"shape {shape}: {message}"
        del inputs, out
    return True, f"the target's check passed on {len(shapes)} verification shapes"


def bench_shape(target, shape, index, kernels, seed, per_family, flush, persisting, unchecked=frozenset()):
    """bench_child._bench_shape's method for several kernels: one graph each, the same fresh sets; every
    replay's output checked, but for the kernels named in `unchecked` (a part of an answer, timed alone)."""
    import torch

    from gpu_worker.pipeline import bench_child as bc
    from gpu_worker.pipeline.protocol import derive_seed
    capture_inputs = target.make_inputs(shape, derive_seed(seed, "bench", index, "capture"), DEVICE)
    graphs, failed = {}, {}
    for name, fn in kernels.items():
        buffers = tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in capture_inputs)
        try:
            graphs[name] = (*bc._capture(fn, buffers), buffers)
        except Exception as e:  # noqa: BLE001 - a kernel that cannot be captured is reported, not timed
            failed[name] = f"CUDA graph capture failed: {type(e).__name__}: {str(e)[:300]}"
            bc._sync()
    del capture_inputs
    names = list(graphs)
    n_sets = per_family * len(target.value_families)
    starts = {n: [bc._event() for _ in range(n_sets)] for n in names}
    ends = {n: [bc._event() for _ in range(n_sets)] for n in names}
    places = {n: [] for n in names}
    wrong = {n: [] for n in names}
    families = []
    for j in range(n_sets):
        families.append(bc.set_family(target, shape, j))
        fresh = bc.set_inputs(target, shape, seed, index, j, DEVICE)
        persisting.reset()
        bc.time_set(j, fresh, graphs, bc.rotation(j, len(names), len(bc.families_of(target, shape))), flush, starts, ends,
                    places)
        ref = target.reference(fresh)
        for name in names:
            if name in unchecked:
                continue
            outputs = graphs[name][1]
            ok, _, message = target.check(outputs[0] if len(outputs) == 1 else tuple(outputs), fresh, ref)
            if not ok:
                wrong[name].append((j, families[-1], message[:300]))
        del fresh, ref
    bc._sync()
    times = {n: [s.elapsed_time(e) * 1000.0 for s, e in zip(starts[n], ends[n])] for n in names}
    del graphs
    if DEVICE == "cuda":
        torch.cuda.empty_cache()
    return times, families, places, wrong, failed


def summarize(times, families, places, wrong, failed, default="torch", best="ark_best") -> dict:
    from gpu_worker.pipeline import stats
    out = {}
    for name, t in times.items():
        row = {"wrong_replays": len(wrong[name]), "first_wrong": wrong[name][0] if wrong[name] else None}
        row["all"] = stats.kernel_stats(t)
        row["place_mean_us"] = stats.place_means(t, places[name])
        row["by_family"] = {}
        for fam in dict.fromkeys(families):
            sub = [x for x, f in zip(t, families) if f == fam]
            s = stats.kernel_stats(sub)
            row["by_family"][fam] = {k: s[k] for k in ("mean_us", "mean_ci95_us", "median_us", "p99_us", "max_us", "calls")}
        for ref in (default, best):
            if ref in times and ref != name:
                r = stats.paired_mean_ratio(t, times[ref])
                r.pop("samples")
                row[f"vs_{ref}"] = r
        out[name] = row
    for name, why in failed.items():
        out[name] = {"not_timed": why}
    return out


def run(args) -> None:
    import torch

    sys.path.insert(0, str(ROOT))
    from gpu_worker.pipeline import bench_child as bc
    from gpu_worker.pipeline.child_run import load_module
    from gpu_worker.targets import get_target

    t_start = time.time()
    lines = []

    def log(msg):
        print(msg, flush=True)
        lines.append(msg)

    target = get_target(args.target)
    topk_best = load_module(str(ROOT / "gpu_worker/candidates/dsa_topk/best.py"), "ark_dsa_topk_best").forward
    kernels, peers, unchecked = {"torch": target.baseline}, {}, set()
    if args.target == "dsa_topk":
        fi_topk, build = load_flashinfer(Path(args.fi_dir), log)
        log(f"flashinfer {FI_VERSION}: {build['module']}; CUB: {build['cub']}")
        best = topk_best
        candidates = {}
        for name, backend in FI_BACKENDS.items():
            if backend["cub"] and build["cub"] == "stub":
                peers[name] = {"status": "not built", "detail": "cub_topk.cu stubbed in this build"}
                continue
            candidates[name] = (fi_kernel(fi_topk, backend), backend)
    else:
        dg, build = load_deepgemm(Path(args.dg_dir), log)
        best = load_module(str(ROOT / f"gpu_worker/candidates/{args.target}/best.py"), "ark_fp8_best").forward
        candidates = {name: (fn, {}) for name, fn in fp8_peer_kernels(dg, topk_best).items()}
        unchecked.add("dg_logits_only")
    kernels["ark_best"] = best
    for name, (fn, about) in candidates.items():
        if name in unchecked:  # timed for the split, never an answer
            peers[name] = {"status": "unchecked", "detail": "logits only: not the target's output"}
            kernels[name] = fn
            continue
        ok, detail = verify(target, fn, args.seed)
        peers[name] = {"status": "verified" if ok else "wrong", "detail": detail, **about}
        log(f"{name}: {peers[name]['status']}: {detail}")
        if ok:
            kernels[name] = fn
    ok, detail = verify(target, best, args.seed)
    log(f"ark_best: {'verified' if ok else 'WRONG'}: {detail}")
    flush = torch.empty(bc.L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    persisting = bc._PersistingL2()
    shapes = target.benchmark_shapes(args.profile)
    if args.shapes:
        shapes = [shapes[i] for i in args.shapes]
    results = []
    for i, shape in enumerate(shapes):
        if time.time() - t_start > args.budget_s:
            log(f"budget: shapes from {i} on not timed")
            break
        t0 = time.time()
        times, families, places, wrong, failed = bench_shape(target, shape, i, kernels, args.seed, args.per_family, flush,
                                                     persisting, unchecked)
        res = {"shape": shape, "families": families, "kernels": summarize(times, families, places, wrong, failed),
               "times_us": times if args.raw else None, "seconds": time.time() - t0}
        results.append(res)
        cells = "  ".join(f"{n} {k['all']['mean_us']:.1f}/{k['all']['p99_us']:.1f}" + (" WRONG" if k["wrong_replays"] else "")
                          for n, k in res["kernels"].items() if "all" in k)
        log(f"{shape['rows']} x {shape['n_ctx']}: {cells}  ({res['seconds']:.1f} s)")
    doc = {"target": args.target, "device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "triton": __import__("triton").__version__, "cuda": torch.version.cuda, "build": build, "peers": peers,
           "seed": args.seed, "profile": args.profile, "per_family": args.per_family,
           "method": "bench_child: graph per kernel, fresh set copied in, outputs poisoned, L2 flushed, one replay per "
                     "event pair, rotating order; every replay checked",
           "results": results, "wall_s": time.time() - t_start, "log": lines}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    Path(args.out).with_suffix(".md").write_text(table(doc))
    print(table(doc))


def table(doc) -> str:
    """Mean [95% interval] and p99 per kernel per shape (all families), then mean / p99 per family."""
    names = []
    for r in doc["results"]:
        names += [n for n in r["kernels"] if n not in names]
    def fmt(k):  # a kernel with a wrong replay is reported wrong, not by its times
        if "all" not in k:
            return "not timed"
        if k["wrong_replays"]:
            return f"wrong ({k['wrong_replays']} of {k['all']['calls']} replays)"
        a = k["all"]
        return f"{a['mean_us']:.1f} [{a['mean_ci95_us'][0]:.1f}, {a['mean_ci95_us'][1]:.1f}] / {a['p99_us']:.1f}"
    out = ["| rows x n_ctx | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for r in doc["results"]:
        s = r["shape"]
        out.append(f"| {s['rows']} x {s['n_ctx']} | " + " | ".join(fmt(r["kernels"][n]) if n in r["kernels"] else "-"
                                                              for n in names) + " |")
    out += ["", "| rows x n_ctx | family | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for r in doc["results"]:
        s = r["shape"]
        for fam in dict.fromkeys(r["families"]):
            cells = []
            for n in names:
                k = r["kernels"].get(n, {})
                f = k.get("by_family", {}).get(fam)
                cells.append("wrong" if k.get("wrong_replays") else f"{f['mean_us']:.1f} / {f['p99_us']:.1f}" if f else "-")
            out.append(f"| {s['rows']} x {s['n_ctx']} | {fam} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    pp = sub.add_parser("prepare", help="this machine: make var/fi/ from the wheels")
    pp.add_argument("--cub", action="store_true", help="build CUB's path cut to float32 ragged (else stubs)")
    pp.add_argument("--build", action="store_true", help="compile the top-k module here (nvcc 13) into var/fi/topk.so")
    pp.add_argument("--jobs", type=int, default=2)
    pd = sub.add_parser("prepare-deepgemm", help="this machine: pack var/dg/ from a DeepGEMM checkout")
    pd.add_argument("--src", required=True, help="a DeepGEMM checkout with its submodules")
    pd.add_argument("--commit", help="the checkout's commit, when it is not a git work tree")
    pr = sub.add_parser("run", help="the GPU: verify, then time every kernel on the same fresh inputs")
    pr.add_argument("--out", required=True, help="JSON path; a .md table is written beside it")
    pr.add_argument("--target", default="dsa_topk", choices=["dsa_topk", "dsa_indexer_topk_fp8"],
                    help="dsa_topk: FlashInfer's top-k peers; dsa_indexer_topk_fp8: DeepGEMM's paged logits")
    pr.add_argument("--fi-dir", default=str(FI_DIR))
    pr.add_argument("--dg-dir", default=str(DG_DIR))
    pr.add_argument("--profile", default="full", choices=["full", "smoke"])
    pr.add_argument("--per-family", type=int, default=32, help="input sets per value family per shape")
    pr.add_argument("--shapes", type=int, nargs="*", help="indices into the benchmark shapes (default all)")
    pr.add_argument("--seed", type=int, default=20261204)
    pr.add_argument("--budget-s", type=float, default=420.0, help="no new shape after this many seconds")
    pr.add_argument("--raw", action="store_true", help="keep every call's time in the JSON")
    args = p.parse_args(argv)
    {"prepare": prepare, "prepare-deepgemm": prepare_deepgemm, "run": run}[args.cmd](args)


if __name__ == "__main__":
    main()
