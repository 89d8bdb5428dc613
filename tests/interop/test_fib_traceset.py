"""Export to FlashInfer-Bench's classes and the promotion TraceSet that `flashinfer_bench.apply` serves
(docs/interop.md). CPU only: apply's selection and a Triton solution run through Triton's interpreter."""

import hashlib
import json
from pathlib import Path

import pytest
import torch

pytest.importorskip("flashinfer_bench", reason="the fib extra (flashinfer-bench) is not installed")

from flashinfer_bench import ApplyConfig, Trace, TraceSet
from flashinfer_bench.apply.runtime import ApplyRuntime

from gpu_worker.fib.reader import build_document
from gpu_worker.fib.target import target_from_document
from gpu_worker.fib.traceset import export_traceset, promotion_traceset

ROOT = Path(__file__).resolve().parents[2]
DEF = "fused_add_rmsnorm_h2048"
SEED = (ROOT / "gpu_worker" / "candidates" / "add_rmsnorm" / "seed.py").read_text()
# the definition passes no eps (and apply's builder wants exactly its inputs): the same kernel, eps fixed
KERNEL = SEED.replace("def forward(x, residual, weight, eps):", "def _forward_eps(x, residual, weight, eps):") + (
    "\n\ndef forward(hidden_states, residual, weight):\n"
    "    return _forward_eps(hidden_states, residual, weight, 1e-6)\n")


def document(cells=(1, 1, 16, 128, 1024)):
    lines = [json.dumps({"definition": DEF, "workload": {"axes": {"batch_size": b}, "inputs": {}, "uuid": f"w{i}"}})
             for i, b in enumerate(cells)]
    return build_document((ROOT / "gpu_worker" / "fib" / "definitions" / f"{DEF}.json").read_text(),
                          "\n".join(lines), ["batch_size=1:16384"])


def h200_report_as_imported() -> dict:
    """The H200 report of add_rmsnorm's seed, its hidden=2048 shapes named as the definition names them."""
    report = json.loads((ROOT / "bench/results/h200/reports/add_rmsnorm__seed.json").read_text())
    for stage in ("verify", "benchmark"):
        shapes = [s for s in report["stages"][stage]["shapes"] if s["shape"].get("hidden") == 2048]
        for s in shapes:
            s["shape"] = {"batch_size": s["shape"]["tokens"]}
        report["stages"][stage]["shapes"] = shapes
    return report


def test_a_run_exports_as_a_traceset_that_reads_back_through_the_package(tmp_path):
    report = h200_report_as_imported()
    timed = [s for s in report["stages"]["benchmark"]["shapes"]]
    assert timed, "the stored H200 report has hidden=2048 benchmark shapes"
    failing = json.loads(json.dumps(report))
    failing["stages"]["verify"]["shapes"][0].update({"pass": False, "max_error": 0.5, "message": "y off"})
    failing["stages"]["verify"]["status"] = "fail"
    result = export_traceset({"document": document(), "candidates": [
        {"name": "ark_seed", "source": KERNEL, "author": "sweep", "status": "kept", "reports": [report]},
        {"name": "ark_wrong", "source": KERNEL + "\n# wrong\n", "status": "reverted", "reports": [failing]}]},
        tmp_path / "ts")
    ts = TraceSet.from_path(str(tmp_path / "ts"))
    assert list(ts.definitions) == [DEF] and result["traces"] == len(timed) + 1
    assert sorted(s.name for s in ts.solutions[DEF]) == ["ark_seed", "ark_wrong"]
    assert ts.get_solution("ark_seed").sources[0].content == KERNEL
    assert sorted(w.workload.axes["batch_size"] for w in ts.workloads[DEF]) == [1, 16, 128, 1024]
    passed = [t for t in ts.traces[DEF] if t.solution == "ark_seed"]
    assert {t.evaluation.status.value for t in passed} == {"PASSED"}
    for t, s in zip(sorted(passed, key=lambda t: t.workload.axes["batch_size"]),
                    sorted(timed, key=lambda s: s["shape"]["batch_size"])):
        assert t.evaluation.performance.latency_ms == pytest.approx(s["candidate"]["median_us"] / 1000)
        assert t.evaluation.environment.hardware == "NVIDIA H200"
        timing = json.loads(t.evaluation.log.removeprefix("ark.timing "))
        assert timing["median_ci95_us"] == pytest.approx(s["candidate"]["ci95_us"])
        assert Trace.model_validate_json(t.model_dump_json()) == t  # the round trip through the class
    [wrong] = [t for t in ts.traces[DEF] if t.solution == "ark_wrong"]
    assert wrong.evaluation.status.value == "INCORRECT_NUMERICAL"
    assert wrong.evaluation.correctness.max_absolute_error == 0.5


def serving_config(bounds):
    return {"schema": "ark.serving/1", "target": DEF, "hardware": "h200", "version": 2, "axes": ["batch_size"],
            "fallback": "default", "routes": [{"bounds": {"batch_size": bounds}, "kernel": {
                "candidate_id": "c7", "params": {}, "source": KERNEL,
                "source_hash": "sha256:" + hashlib.sha256(KERNEL.encode()).hexdigest()}}]}


def apply_picks(ts, target, batches):
    """{batch: True when apply ran a Solution, False when it called the engine's fallback}, each output checked."""
    from gpu_worker.pipeline import interpreter_fix

    interpreter_fix.install()  # bf16 rounding as on the GPU (the interpreter truncates; h would be 1 ulp off)
    calls, picks = [], {}

    def fallback(*args):
        calls.append(args[0].shape[0])
        return target.baseline(*args)

    with ApplyRuntime(ts, ApplyConfig(on_miss_policy="fallback_only", aot_ratio=0.0)) as rt:
        for batch in batches:
            inputs = target.make_inputs({"batch_size": batch}, batch, "cpu")
            before = len(calls)
            out = rt.dispatch(DEF, inputs, {}, fallback)
            picks[batch] = len(calls) == before
            ok, _, message = target.check(out, inputs, target.reference(inputs))
            assert ok, message
    return picks


def test_apply_serves_the_promoted_solution_on_every_shape_of_its_region_and_nowhere_else(tmp_path, monkeypatch):
    monkeypatch.setenv("FIB_CACHE_PATH", str(tmp_path / "cache"))
    doc = document()
    result = promotion_traceset({"document": doc, "serving_config": serving_config([1, 129])}, tmp_path / "ts")
    [name] = [k for k in result["served"] if k != "default"]
    assert result["served"] == {"default": 1, name: 3}  # cells 1, 16, 128 promoted; 1024 stays the default
    assert (result["coverage"], result["keys"]) == ("region", 128)
    ts = TraceSet.from_path(str(tmp_path / "ts"))
    assert sorted(t.workload.axes["batch_size"] for t in ts.traces[DEF]) == list(range(1, 129))
    assert {t.solution for t in ts.traces[DEF]} == {name}
    # 17 and 100 are no workload cell but lie in the promoted box; 129 is just past it, 1024 far past
    picks = apply_picks(ts, target_from_document(doc), (16, 17, 100, 128, 129, 1024))
    assert picks == {16: True, 17: True, 100: True, 128: True, 129: False, 1024: False}
    # the promoted kernel really ran: its output is the Triton kernel's, bit for bit
    target = target_from_document(doc)
    inputs = target.make_inputs({"batch_size": 17}, 5, "cpu")
    namespace = {}
    exec(compile(KERNEL, "kernel.py", "exec"), namespace)  # noqa: S102 - the kernel itself, outside apply
    with ApplyRuntime(ts, ApplyConfig(on_miss_policy="fallback_only", aot_ratio=0.0)) as rt:
        routed = rt.dispatch(DEF, inputs, {}, None)  # no fallback: a miss would raise
    assert all(torch.equal(a, b) for a, b in zip(routed, namespace["forward"](*inputs)))
    doc_small = dict(doc, ranges={"batch_size": [1, 64]})  # past the operating range: no key, the default
    promotion_traceset({"document": doc_small, "serving_config": serving_config([32, None])}, tmp_path / "ts2")
    keys = sorted(t.workload.axes["batch_size"] for t in TraceSet.from_path(str(tmp_path / "ts2")).traces[DEF])
    assert keys == list(range(32, 65))


def test_past_max_keys_the_promotion_lists_the_routed_cells_only(tmp_path, monkeypatch):
    from gpu_worker.fib import traceset

    monkeypatch.setenv("FIB_CACHE_PATH", str(tmp_path / "cache"))
    monkeypatch.setattr(traceset, "MAX_KEYS", 100)
    doc = document()
    result = promotion_traceset({"document": doc, "serving_config": serving_config([1, 129])}, tmp_path / "ts")
    assert (result["coverage"], result["keys"]) == ("cells", 3)
    ts = TraceSet.from_path(str(tmp_path / "ts"))
    assert sorted(t.workload.axes["batch_size"] for t in ts.traces[DEF]) == [1, 16, 128]
    assert apply_picks(ts, target_from_document(doc), (16, 17)) == {16: True, 17: False}


def test_a_route_between_the_cells_is_covered_and_one_past_the_range_serves_only_the_default(tmp_path, monkeypatch):
    monkeypatch.setenv("FIB_CACHE_PATH", str(tmp_path / "cache"))
    result = promotion_traceset({"document": document(), "serving_config": serving_config([2000, 4000])},
                                tmp_path / "ts")
    assert result["served"] == {"default": 4} and result["keys"] == 2000  # no workload cell, its 2000 sizes
    assert sorted(t.workload.axes["batch_size"] for t in TraceSet.from_path(str(tmp_path / "ts")).traces[DEF]) == \
        list(range(2000, 4000))
    result = promotion_traceset({"document": document(), "serving_config": serving_config([20000, None])},
                                tmp_path / "ts")
    assert result["served"] == {"default": 4} and result["keys"] == 0
    ts = TraceSet.from_path(str(tmp_path / "ts"))
    assert not ts.traces and not ts.solutions
