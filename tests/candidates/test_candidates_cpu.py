"""CPU checks of the candidate kernels (Triton interpreter, CuTe DSL compile-only), tiny shapes.

Run: TRITON_INTERPRET=1 pytest tests/candidates -q
(without a CUDA device, tests/candidates/conftest.py switches the interpreter on where it is unset).
"""
import importlib.util
import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CAND = os.path.join(ROOT, "gpu_worker", "candidates")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from topk_check import check_topk, check_topk_tol, indexer_scores


def _load(rel, params=None):
    spec = importlib.util.spec_from_file_location("cand_" + rel.replace("/", "_")[:-3], os.path.join(CAND, rel))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    if params:
        m.PARAMS.update(params)
    return m


def _contract(m):
    assert callable(m.forward)
    assert isinstance(m.PARAMS, dict) and isinstance(m.SPACE, dict)
    for name, vals in m.SPACE.items():
        assert isinstance(vals, list) and vals, name


def _topk_cases():
    g = torch.Generator().manual_seed(0)
    cases = []
    for (M, N, k) in [(4, 3000, 64), (3, 5000, 300), (2, 100, 128), (1, 4000, 1000)]:
        x = torch.randn(M, N, generator=g)
        x[0] = torch.randint(0, 5, (N,), generator=g).float()      # big tie buckets
        if M > 2:
            x[2, : N // 2] = -0.0
            x[2, N // 2:] = 0.0
        if M > 3:
            x[3] = 2.5                                               # all equal
        if M > 1:
            x[1] = 16.0 + 16.0 * torch.rand(N, generator=g)          # one octave: top-byte bin = whole row
        lengths = torch.randint(0, N + 1, (M,), generator=g).int()
        lengths[0] = N
        cases.append((x, lengths, k))
    return cases


# dsa_topk/best.py meets these cases, with the same small-sample parameters, in test_topk_paths_cpu.py (its
# `key` path and every other path, with the tie cases run twice to show a racy tie-break): a run here repeated
# that interpreter work.
TOPK = [("dsa_topk/seed.py", {"BLOCK": 512})]


@pytest.mark.parametrize("rel,params", TOPK, ids=[t[0] for t in TOPK])
def test_dsa_topk_exact_and_deterministic(rel, params):
    m = _load(rel, params)
    _contract(m)
    for x, lengths, k in _topk_cases():
        xc = x.clone()
        out = m.forward(x, lengths, k)
        assert torch.equal(x, xc)
        check_topk(out, x, lengths, k)
        assert torch.equal(out, m.forward(x, lengths, k))


IDX_TK = {"N_PER_PROG": 128, "BLOCK_N": 64, "TK_BLOCK": 256, "TK_TARGET_CTAS": 8, "TK_SMALL": 512, "TK_NS": 32,
          "TK_G": 8, "TK_RBLOCK": 256}
IDX = [("dsa_indexer_topk/seed.py", {"CHUNK": 256, "N_PER_PROG": 128, "BLOCK_N": 64, "MERGE_BLOCK": 256}),
       ("dsa_indexer_topk/seed.py", {"CHUNK": 256, "N_PER_PROG": 128, "BLOCK_N": 64, "MERGE_BLOCK": 256,
                                     "TRANS": 0, "ROWS": 1}),
       ("dsa_indexer_topk/best.py", IDX_TK),
       ("dsa_indexer_topk/best.py", dict(IDX_TK, TK_SCAN_MAX_ROWS=0)),  # the top-k's per-value atomic slots
       # few rows: ROWS cut to the rows there are (1, 2, 4) and the context split finer (512 -> 64 keys)
       ("dsa_indexer_topk/best.py", dict(IDX_TK, N_PER_PROG=512, MIN_NPP=64, MIN_PROGS=64))]


@pytest.mark.parametrize("rel,params", IDX, ids=["seed", "seed-rows1", "best", "best-atomic", "best-few-rows"])
def test_dsa_indexer_topk(rel, params):
    m = _load(rel, params)
    _contract(m)
    g = torch.Generator().manual_seed(1)
    for (M, N, k) in [(3, 700, 64), (2, 100, 128), (1, 300, 64)]:
        q = torch.randn(M, 64, 128, generator=g).bfloat16()
        kk = torch.randn(N, 128, generator=g).bfloat16()
        w = torch.randn(M, 64, generator=g)
        lengths = torch.randint(0, N + 1, (M,), generator=g).int()
        lengths[0] = N
        out = m.forward(q, kk, w, lengths, k)
        check_topk_tol(out, indexer_scores(q, kk, w), lengths, k)


def _rms_ref(x, r, w, eps):
    h = (x.float() + r.float()).bfloat16()
    hd = h.double()
    return h, hd * torch.rsqrt(hd.pow(2).mean(-1, keepdim=True) + eps) * w.double()


def test_add_rmsnorm_triton():
    m = _load("add_rmsnorm/seed.py")
    _contract(m)
    g = torch.Generator().manual_seed(2)
    for T, D in [(3, 2048), (5, 3000), (1, 7168)]:
        x = torch.randn(T, D, generator=g).bfloat16()
        r = torch.randn(T, D, generator=g).bfloat16()
        w = (1 + 0.1 * torch.randn(D, generator=g)).bfloat16()
        h, y = m.forward(x, r, w, 1e-6)
        href, yref = _rms_ref(x, r, w, 1e-6)
        # the CPU interpreter rounds f32 -> bf16 toward zero: allow one bf16 ulp on h here
        assert float((h.float() - href.float()).abs().max()) <= float(href.float().abs().max()) * 2 ** -7
        assert float((y.double() - yref).norm() / yref.norm()) < 8e-3
        assert h.dtype == torch.bfloat16 and y.dtype == torch.bfloat16


def test_add_rmsnorm_cute_compiles_for_sm90a(monkeypatch):
    pytest.importorskip("cutlass")
    pytest.importorskip("cutlass.cute")
    if not torch.cuda.is_available():
        monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    m = _load("add_rmsnorm/seed_cute.py")
    _contract(m)
    for D in (8192, 3000):
        fn = m.compile_for(D)
        assert fn is not None
        assert m.compile_for(D) is fn                      # cached per (dtype, D, threads, vec)
        ptx = getattr(fn, "__ptx__", None)
        if ptx:
            assert "sm_90a" in ptx and "ld.global.v4" in ptx
