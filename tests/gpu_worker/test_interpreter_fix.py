"""Triton's interpreter, as a CPU child runs it (gpu_worker/pipeline/interpreter_fix.py), converts between
bf16 and f32 exactly as torch (and the GPU) does, special values included; its speed patches change no
result and leave triton.language as Triton's own launch leaves it."""

import importlib.util
import logging
import os
from pathlib import Path

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")
torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

from triton.runtime import interpreter

from gpu_worker.pipeline import interpreter_fix
from gpu_worker.targets import TARGETS

interpreter_fix.install()
CANDIDATES = Path(__file__).resolve().parents[2] / "gpu_worker" / "candidates"


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


def _seed(target):
    spec = importlib.util.spec_from_file_location(f"interp_fix_{target}", CANDIDATES / target / "seed.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Kernels with jit helpers of their own and of Triton's (tl.sum's combine function lives in a module that sees
# only triton.language.core), bf16 casts both ways, tl.dot, loops and masks: every path the patches touch.
CASES = {
    "add_rmsnorm": {"tokens": 5, "hidden": 3000, "values": "outliers"},
    "dsa_topk": {"rows": 3, "n_ctx": 5000, "k": 2048, "values": "ties", "lengths": "ragged"},
    "dsa_indexer_topk": {"rows": 2, "n_ctx": 3000, "k": 2048, "values": "near_bf16", "lengths": "ragged"},
}


def _bits(out) -> list[bytes]:
    outputs = out if isinstance(out, (tuple, list)) else [out]
    return [t.contiguous().view(torch.uint8).numpy().tobytes() for t in outputs]


@pytest.fixture
def without_speedups():
    interpreter_fix.remove_speedups()
    yield
    interpreter_fix.install_speedups()


@pytest.mark.parametrize("target", sorted(CASES))
def test_the_speed_patches_leave_every_output_bit_identical(target, without_speedups):
    module = _seed(target)
    inputs = TARGETS[target].make_inputs(CASES[target], 7, "cpu")
    plain = _bits(module.forward(*inputs))
    plain_again = _bits(module.forward(*inputs))
    assert interpreter_fix.install_speedups()
    assert interpreter._patch_lang.__module__ == interpreter_fix.__name__
    fast = _bits(module.forward(*inputs))
    assert plain == plain_again, "the kernel is not deterministic: the comparison below would prove nothing"
    assert fast == plain


def _language_state():
    """Which names of triton.language, its core and its tensor are Triton's own builtins right now."""
    return {(owner.__name__, name): tl.core.is_builtin(value)
            for owner in (tl, tl.core, tl.tensor) for name, value in vars(owner).items()}


def test_a_launch_leaves_the_language_as_triton_leaves_it(without_speedups):
    module = _seed("add_rmsnorm")
    inputs = TARGETS["add_rmsnorm"].make_inputs(CASES["add_rmsnorm"], 3, "cpu")
    module.forward(*inputs)
    plain = _language_state()
    assert interpreter_fix.install_speedups()
    module.forward(*inputs)
    assert _language_state() == plain
    assert tl.core.is_builtin(tl.load), "the launch left triton.language patched"


def test_another_triton_release_gets_no_speed_patch_and_a_log_line(without_speedups, monkeypatch, caplog):
    monkeypatch.setattr(interpreter_fix, "SPEED_PATCHED_TRITON", "0.0.0")
    with caplog.at_level(logging.WARNING, logger=interpreter_fix.__name__):
        assert not interpreter_fix.install_speedups()
    assert f"Triton {triton.__version__} is not 0.0.0" in caplog.text
    assert interpreter._patch_lang.__module__ == "triton.runtime.interpreter"
    assert interpreter._get_np_dtype.__module__ == "triton.runtime.interpreter"


def test_the_cpu_hosts_triton_pin_is_the_release_the_patches_were_read_against():
    import tomllib  # local: only this test reads pyproject.toml
    requirements = tomllib.loads((CANDIDATES.parents[1] / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"triton=={interpreter_fix.SPEED_PATCHED_TRITON}" in requirements
