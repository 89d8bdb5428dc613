"""The FP8 indexer's seed passes the target's own check in Triton's interpreter, small shapes: rows shorter than
k, ragged and full, shuffled pages, the tie-heavy families; the best (its logits in CuTe DSL, FP8 WGMMA on sm_90a)
compiles through the pipeline on a CPU and says its numerics were not checked there (docs/kernels.md, "The FP8
indexer"). The best's top-k is dsa_topk's, folded: tests/candidates/test_topk_paths_cpu.py runs its paths."""
import importlib.util
import os

import pytest

if not os.environ.get("TRITON_INTERPRET"):
    import torch as _t
    if not _t.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from gpu_worker.targets import dsa_indexer_topk_fp8 as t  # noqa: E402

CAND = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                    "gpu_worker", "candidates", "dsa_indexer_topk_fp8")
# chunks of 1024 so that the interpreter's shapes take the running merge more than once
SEED_PARAMS = {"CHUNK": 1024, "MERGE_BLOCK": 1024}
SHAPES = [t._shape(3, 4100, "relu"), t._shape(2, 4100, "ties", "full")]  # ragged: lengths 4100, 2047, 2048


def _load(name, params):
    spec = importlib.util.spec_from_file_location("fp8_" + name[:-3], os.path.join(CAND, name))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    m.PARAMS.update(params)
    return m


_e4m3 = _load("seed.py", {})._e4m3


@triton.jit
def _decode(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(o_ptr + offs, _e4m3(tl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)


def test_the_fp8_indexer_seed_passes_the_check():
    m = _load("seed.py", SEED_PARAMS)
    assert isinstance(m.PARAMS, dict) and all(isinstance(v, list) and v for v in m.SPACE.values())
    for i, shape in enumerate(SHAPES):
        inputs = t.make_inputs(shape, 20 + i, "cpu")
        before = [x.clone() for x in inputs]
        out = m.forward(*inputs)
        assert all(torch.equal(a, b) for a, b in zip(before, inputs))     # inputs untouched
        ok, _, message = t.check(out, inputs, t.reference(inputs))
        assert ok, (shape, message)


def test_the_interpreter_decodes_every_fp8_byte_exactly():
    """The candidates read FP8 bytes in the interpreter and decode them from their bits (its own conversion
    takes minutes per call): every finite e4m3fn value comes back exactly."""
    b = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    b = b[(b & 0x7F) != 0x7F]                                          # the two NaNs
    out = torch.empty(b.numel(), dtype=torch.float32)
    _decode[(1,)](b, out, b.numel(), BLOCK=256)
    assert torch.equal(out, b.view(torch.float8_e4m3fn).float())


@pytest.mark.slow
def test_the_best_compiles_in_the_pipeline_on_a_cpu():
    # its logits kernel is CuTe DSL (FP8 WGMMA, sm_90a), its top-k Triton: the guard names both, and on a CPU
    # the verify stage compiles the CuTe kernel and says that its numerics were not checked
    from gpu_worker.pipeline import evaluate
    path = os.path.join(CAND, "best.py")
    report = evaluate({"candidate_id": "best.py", "target": "dsa_indexer_topk_fp8",
                       "source": open(path).read(), "profile": "smoke"})
    assert report["stages"]["guard"]["dsl"] == "triton+cute"
    verify = report["stages"]["verify"]
    assert verify["status"] == "compile_only", verify["findings"]
