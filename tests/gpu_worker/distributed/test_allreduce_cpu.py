"""The multi-process harness on CPU: two spawned ranks over gloo, Triton through its interpreter.

What runs here: the allreduce target's contract, the default kernel (gloo stands in for NCCL), the
seed's reduction kernel over buffers the harness gathered with gloo (there is no peer memory on
CPU: gpu_worker/distributed/comm.py), wrong candidates failing, NVLink multicast forced off in every
rank, the seed's CUDA path compiled for sm_90 (not run), and the rank-merging of benchmark times.
What does not: peer loads, the signal-pad barrier, any timing (docs/allreduce.md).
"""

import os
import re
import textwrap
from pathlib import Path

import pytest
import torch

from gpu_worker.distributed import MULTICAST_OFF, evaluate_distributed
from gpu_worker.distributed.bench import merge_ranks
from gpu_worker.distributed.runner import verify_ranks
from gpu_worker.pipeline import evaluate as _evaluate_fn  # noqa: F401  (makes the module importable below)
from gpu_worker.pipeline.guard import check_candidate
from gpu_worker.targets import TARGETS
from gpu_worker.targets.allreduce import ALLREDUCE, ALLREDUCE_RMSNORM, MULTI_PROCESS_TARGETS

SEED = Path(__file__).resolve().parents[3] / "gpu_worker" / "candidates" / "allreduce" / "seed.py"
KB = 1024


@pytest.fixture(autouse=True)
def _cpu_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setenv("ARK_DEVICE", "cpu")


def _wrong(body: str) -> str:
    """A candidate with the seed's structure whose reduction loop is `body`."""
    return textwrap.dedent('''
        import torch
        import triton
        import triton.language as tl


        @triton.jit
        def _reduce(out_ptr, buffer_ptrs, n, RANK: tl.constexpr, WORLD: tl.constexpr, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = offs < n
            acc = tl.zeros([BLOCK], dtype=tl.float32)
        %s
            tl.store(out_ptr + offs, acc.to(tl.bfloat16), mask=m)


        def forward(x, comm):
            out = torch.empty_like(x)
            comm.stage(x)
            _reduce[(triton.cdiv(x.numel(), 1024),)](out, comm.buffer_ptrs, x.numel(), RANK=comm.rank,
                                                     WORLD=comm.world_size, BLOCK=1024)
            return out
    ''') % textwrap.indent(textwrap.dedent(body), " " * 4)


OWN_ONLY = _wrong('''
    own = tl.load(buffer_ptrs + RANK).to(tl.pointer_type(tl.bfloat16))
    acc += tl.load(own + offs, mask=m, other=0.0).to(tl.float32)
''')
SUMS_TWICE = _wrong('''
    for _ in tl.static_range(2):
        for r in tl.static_range(WORLD):
            peer = tl.load(buffer_ptrs + r).to(tl.pointer_type(tl.bfloat16))
            acc += tl.load(peer + offs, mask=m, other=0.0).to(tl.float32)
''')
SMALL = [{"bytes": 1 * KB, "numel": 512}, {"bytes": 37894, "numel": 18947}]


def test_the_multi_process_targets_stay_out_of_the_single_process_registry():
    assert set(MULTI_PROCESS_TARGETS) == {"allreduce", "allreduce_rmsnorm"}
    assert not set(MULTI_PROCESS_TARGETS) & set(TARGETS)
    assert ALLREDUCE.world_size == 2 and ALLREDUCE.axes == {"bytes": (1 * KB, 64 * KB * KB)}
    full = ALLREDUCE.verification_shapes("full")
    assert max(s["bytes"] for s in full) == 64 * KB * KB  # the largest message is always verified
    assert any(s["numel"] % 2 for s in ALLREDUCE.verification_shapes("smoke"))  # an odd size
    sizes = [s["bytes"] for s in ALLREDUCE.benchmark_shapes("full")]
    assert sizes[0] == 1 * KB and sizes[-1] == 64 * KB * KB and len(sizes) == 17


def test_ranks_share_the_residual_and_weight_but_not_their_partials():
    shape = ALLREDUCE_RMSNORM.verification_shapes("smoke")[1]
    a, b = ALLREDUCE_RMSNORM.all_inputs(shape, 7)
    assert not torch.equal(a[0], b[0])
    assert torch.equal(a[1], b[1]) and torch.equal(a[2], b[2])


def test_the_check_refuses_one_ranks_buffer_a_doubled_sum_and_nan():
    shape = SMALL[1]
    inputs = ALLREDUCE.all_inputs(shape, 11)
    ref = ALLREDUCE.reference(inputs)
    right = (inputs[0][0].double() + inputs[1][0].double()).to(torch.bfloat16)
    assert ALLREDUCE.check(right, inputs[0], ref)[0]
    assert not ALLREDUCE.check(inputs[0][0].clone(), inputs[0], ref)[0]
    assert not ALLREDUCE.check((2 * right.double()).to(torch.bfloat16), inputs[0], ref)[0]
    nan = right.clone()
    nan[5] = float("nan")
    assert ALLREDUCE.check(nan, inputs[0], ref)[1:] == (float("inf"), "NaN in the output")


def test_the_seed_is_verified_in_two_gloo_ranks_with_multicast_forced_off(monkeypatch):
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")  # the worker's own value must not reach a rank
    report = evaluate_distributed({"target": "allreduce", "source": SEED.read_text(), "seed": 20261202})
    verify = report["stages"]["verify"]
    assert report["stages"]["guard"]["status"] == "pass", report["stages"]["guard"]
    assert verify["status"] == "pass", verify["findings"]
    sizes = [s["shape"]["bytes"] for s in verify["shapes"]]
    assert sizes[:3] == [1 * KB, 37894, 1024 * KB]
    assert all(s["launches"] == ["_one_shot_all_reduce"] for s in verify["shapes"])
    assert verify["ranks_env"] == {"0": MULTICAST_OFF, "1": MULTICAST_OFF}  # JSON keys
    assert report["stages"]["benchmark"]["status"] == "unavailable"
    assert report["verdict"]["status"] == "pass" and report["verdict"]["complete"] is False
    assert report["world_size"] == 2 and report["mode"] == "cpu"


def test_the_default_kernel_is_right_at_1k_37k_odd_and_1m(tmp_path):
    shapes = ALLREDUCE.verification_shapes("smoke")
    entry = verify_ranks(ALLREDUCE, shapes=shapes, seed=5, device="cpu", world=2, scratch=tmp_path)
    assert entry["status"] == "pass", entry["findings"]
    assert [s["shape"]["bytes"] for s in entry["shapes"]] == [1 * KB, 37894, 1024 * KB]


@pytest.mark.parametrize("source, why", [(OWN_ONLY, "own buffer only"), (SUMS_TWICE, "sums twice")])
def test_a_wrong_candidate_fails_verification(tmp_path, source, why):
    findings, info = check_candidate(source, ALLREDUCE)
    assert findings == [], findings  # it is wrong, not forbidden: verification must catch it
    entry = verify_ranks(ALLREDUCE, shapes=SMALL, seed=9, device="cpu", world=2, scratch=tmp_path,
                         source=source, info=info)
    assert entry["status"] == "fail", why
    assert {f["code"] for f in entry["findings"]} == {"verify:wrong"}, entry["findings"]
    assert not any(s["pass"] for s in entry["shapes"])


def test_the_fused_default_allreduce_rmsnorm_is_right(tmp_path):
    shapes = ALLREDUCE_RMSNORM.verification_shapes("smoke")[:2]
    entry = verify_ranks(ALLREDUCE_RMSNORM, shapes=shapes, seed=3, device="cpu", world=2, scratch=tmp_path)
    assert entry["status"] == "pass", entry["findings"]


COMPILE_SM90 = """
import importlib.util, sys
import triton
from triton.backends.compiler import GPUTarget
spec = importlib.util.spec_from_file_location("ark_seed_allreduce", sys.argv[1])
seed = importlib.util.module_from_spec(spec)
spec.loader.exec_module(seed)
src = triton.compiler.ASTSource(
    fn=seed._one_shot_all_reduce,
    signature={"x_ptr": "*bf16", "out_ptr": "*bf16", "buffer_ptrs": "*i64", "pad_ptrs": "*i64", "n": "i32",
               "RANK": "constexpr", "WORLD": "constexpr", "BLOCK": "constexpr", "PEER_SYNC": "constexpr"},
    constexprs={"RANK": 1, "WORLD": 2, "BLOCK": 2048, "PEER_SYNC": True})
sys.stdout.write(triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8}).asm["ptx"])
"""


def test_the_seeds_cuda_path_compiles_for_sm90_with_system_scope_release_and_acquire():
    """Compiled, not run: there is no GPU here. In its own process: Triton's interpreter mode and
    real compilation do not mix in one process."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", COMPILE_SM90, str(SEED)], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    ptx = done.stdout
    assert len(re.findall(r"atom\.global\.release\.sys\.cas\.b32", ptx)) >= 2  # signal, at both barriers
    assert len(re.findall(r"atom\.global\.acquire\.sys\.cas\.b32", ptx)) >= 2  # wait, at both barriers
    assert "ld.global.cv" in ptx  # peer chunks are never served from a stale cache line


def test_rank_times_merge_to_the_slowest_rank_per_round():
    def rank_msg(rank, cand, inc):
        k = {"times_us": None, "host_us": 10.0 + rank, "host_event_us": 6.0 + rank, "stale_replays": rank,
             "places": [0, 1, 2]}
        return {"type": "bench_shape", "rank": rank, "index": 0, "shape": {"bytes": 1024, "numel": 512},
                "findings": [], "rounds": 3, "input_sets": 2,
                "kernels": {"candidate": dict(k, times_us=cand), "incumbent": dict(k, times_us=inc),
                            "incumbent_aa": dict(k, times_us=inc)}}
    (merged,) = merge_ranks([rank_msg(0, [5.0, 7.0, 6.0], [18.0, 19.0, 17.0]),
                             rank_msg(1, [6.0, 6.5, 6.2], [18.5, 18.0, 18.2])])
    assert merged["kernels"]["candidate"]["times_us"] == [6.0, 7.0, 6.2]
    assert merged["kernels"]["incumbent"]["times_us"] == [18.5, 19.0, 18.2]
    assert merged["kernels"]["candidate"]["host_us"] == 11.0 and merged["kernels"]["candidate"]["stale_replays"] == 1
    assert merged["kernels"]["candidate"]["host_event_us"] == 7.0   # the slowest rank's, as host_us
    assert merged["kernels"]["candidate"]["places"] == [0, 1, 2]     # each round's place, as the ranks timed it
    from gpu_worker.pipeline.bench_report import bench_results
    findings, (entry,), summary, _ = bench_results([merged], ALLREDUCE, None, wall_s=1.0)
    assert findings == [] and entry["candidate"]["median_us"] == 6.2 and entry["ratio"] < 0.5
    assert entry["candidate"]["place_mean_us"] == [6.0, 7.0, 6.2]   # the mean by place in the order
    assert summary["geomean_speedup"] > 2.0


def test_a_kernel_reading_buffers_nobody_wrote_this_call_gets_nan():
    import importlib.util

    from gpu_worker.distributed.comm import Comm
    from gpu_worker.pipeline import interpreter_fix

    interpreter_fix.install()
    spec = importlib.util.spec_from_file_location("ark_seed_allreduce_cpu", SEED)
    seed = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(seed)
    comm = Comm(rank=0, world_size=2, group=None, device="cpu", capacity_bytes=4 * KB)
    inputs = ALLREDUCE.all_inputs(SMALL[0], 1)
    comm.stage = lambda x: None  # as if the peers' messages never arrived
    comm.poison()
    out = seed.forward(inputs[0][0], comm)
    assert ALLREDUCE.check(out, inputs[0], ALLREDUCE.reference(inputs))[2] == "NaN in the output"


def test_a_cuda_worker_with_one_gpu_says_it_needs_two(monkeypatch):
    monkeypatch.setenv("ARK_DEVICE", "cuda")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    report = evaluate_distributed({"target": "allreduce", "source": SEED.read_text(), "seed": 1})
    assert report["verdict"]["reasons"] == ["worker:needs_gpus"]
    assert report["verdict"]["message"] == "needs 2 GPUs, this worker has 1"
    assert {s["status"] for s in report["stages"].values()} == {"unavailable"}


def test_the_pipeline_entry_point_sends_multi_process_targets_to_the_distributed_runner():
    from gpu_worker.pipeline import evaluate

    report = evaluate({"candidate_id": "bad", "attempt": 1, "target": "allreduce", "source": "def forward(:",
                       "incumbent_source": None, "profile": "smoke"})
    assert report["target"] == "allreduce"
    assert report["verdict"]["status"] == "fail"
    assert any(f["code"] == "guard:syntax" for f in report["stages"]["guard"]["findings"])
