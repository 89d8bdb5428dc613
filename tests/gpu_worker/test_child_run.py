"""pipeline/child_run.py: a kernel DSL missing on the worker is the worker's gap, not the candidate's failure."""

import importlib.util

import pytest

from gpu_worker.pipeline import child_run


def _absent(*roots):
    real = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        return None if name in roots else real(name, *args, **kwargs)

    return find_spec


@pytest.mark.parametrize("name", ["cutlass", "cutlass.cute", "triton.language"])
def test_a_dsl_package_absent_from_the_worker_is_a_harness_gap(monkeypatch, name):
    root = name.split(".")[0]
    monkeypatch.setattr(importlib.util, "find_spec", _absent(root))
    message = child_run.missing_dsl(ModuleNotFoundError(f"No module named {name!r}", name=name))
    assert message is not None and repr(root) in message and child_run.DSL_PACKAGES[root] in message


def test_the_candidates_own_import_errors_stay_its_own():
    # cutlass and triton are installed here: a candidate that raises their absence itself, or imports a submodule
    # that does not exist, fails as its own import error
    assert child_run.missing_dsl(ModuleNotFoundError("No module named 'cutlass'", name="cutlass")) is None
    assert child_run.missing_dsl(ModuleNotFoundError("x", name="cutlass.no_such_part")) is None
    assert child_run.missing_dsl(ModuleNotFoundError("x", name="numpy_plus")) is None  # not a DSL
    assert child_run.missing_dsl(ModuleNotFoundError("x")) is None  # no name
    assert child_run.missing_dsl(ImportError("cannot import name 'x' from 'cutlass'")) is None
    assert child_run.missing_dsl(RuntimeError("boom")) is None


def test_the_op_recorder_dispatches_through_its_own_method_not_torchs_dynamo_wrapper():
    # torch wraps a dispatch mode's method in torch._disable_dynamo, whose first call imports torch._dynamo (a
    # CPU-second in every child; docs/harness.md, "The op recorder keeps its dispatch method as written")
    method = child_run.OpRecorder.__dict__["__torch_dispatch__"]
    assert method.__code__.co_filename == child_run.__file__, method.__code__.co_filename
