"""Triton's interpreter, as a CPU child runs it (gpu_worker/pipeline/interpreter_fix.py), converts between bf16
and f32 exactly as torch (and the GPU) does, special values included."""

import os

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")
torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

from gpu_worker.pipeline import interpreter_fix  # noqa: E402

interpreter_fix.install()


@triton.jit
def _widen_then_round(src, wide, narrow, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(src + offs, mask=m).to(tl.float32)       # bf16 -> f32
    tl.store(wide + offs, x, mask=m)
    tl.store(narrow + offs, (x * 1.001).to(tl.bfloat16), mask=m)   # f32 -> bf16, round to nearest even


def test_bf16_widens_exactly_and_f32_rounds_to_nearest_even():
    g = torch.Generator().manual_seed(0)
    special = torch.tensor([float("inf"), float("-inf"), float("nan"), 0.0, -0.0, 1e-40, -1e-40, 3e38, 1.0, -2.5])
    values = torch.cat([special, torch.randn(500, generator=g) * torch.logspace(-40, 38, 500, base=2)]).bfloat16()
    wide = torch.empty(values.numel(), dtype=torch.float32)
    narrow = torch.empty(values.numel(), dtype=torch.bfloat16)
    _widen_then_round[(1,)](values, wide, narrow, values.numel(), BLOCK=1024)
    expect_wide = values.float()
    assert torch.equal(wide.view(torch.int32)[~expect_wide.isnan()], expect_wide.view(torch.int32)[~expect_wide.isnan()])
    assert wide.isnan().equal(expect_wide.isnan())
    expect_narrow = (expect_wide * 1.001).bfloat16()
    ok = ~expect_narrow.isnan()
    assert torch.equal(narrow.view(torch.int16)[ok], expect_narrow.view(torch.int16)[ok])
    assert narrow.isnan().equal(expect_narrow.isnan())
