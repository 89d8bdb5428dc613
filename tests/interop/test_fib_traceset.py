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


def test_apply_serves_the_promoted_solution_exactly_on_the_cells_it_won(tmp_path, monkeypatch):
    from gpu_worker.pipeline import interpreter_fix

    interpreter_fix.install()  # bf16 rounding as on the GPU (the interpreter truncates; h would be 1 ulp off)
    monkeypatch.setenv("FIB_CACHE_PATH", str(tmp_path / "cache"))
    doc = document()
    result = promotion_traceset({"document": doc, "serving_config": serving_config([1, 129])}, tmp_path / "ts")
    [name] = [k for k in result["served"] if k != "default"]
    assert result["served"] == {"default": 1, name: 3}  # 1, 16, 128 promoted; 1024 stays the default
    ts = TraceSet.from_path(str(tmp_path / "ts"))
    target = target_from_document(doc)
    calls = []

    def fallback(*args):
        calls.append(args[0].shape[0])
        return target.baseline(*args)

    with ApplyRuntime(ts, ApplyConfig(on_miss_policy="fallback_only", aot_ratio=0.0)) as rt:
        for batch, promoted in ((16, True), (128, True), (1024, False), (17, False)):
            inputs = target.make_inputs({"batch_size": batch}, batch, "cpu")
            before = len(calls)
            out = rt.dispatch(DEF, inputs, {}, fallback)
            assert (len(calls) == before) == promoted, batch  # 17 lies in the box but is no promoted cell
            ok, _, message = target.check(out, inputs, target.reference(inputs))
            assert ok, message
    assert calls == [1024, 17]
    # the promoted kernel really ran: its output is the Triton kernel's, bit for bit
    inputs = target.make_inputs({"batch_size": 16}, 5, "cpu")
    namespace = {}
    exec(compile(KERNEL, "kernel.py", "exec"), namespace)  # noqa: S102 - the kernel itself, outside apply
    with ApplyRuntime(ts, ApplyConfig(on_miss_policy="fallback_only", aot_ratio=0.0)) as rt:
        routed = rt.dispatch(DEF, inputs, {}, fallback)
    assert all(torch.equal(a, b) for a, b in zip(routed, namespace["forward"](*inputs)))


def test_a_promotion_to_no_cell_writes_a_traceset_that_serves_only_the_default(tmp_path, monkeypatch):
    monkeypatch.setenv("FIB_CACHE_PATH", str(tmp_path / "cache"))
    result = promotion_traceset({"document": document(), "serving_config": serving_config([2000, 4000])},
                                tmp_path / "ts")
    assert result["served"] == {"default": 4}
    ts = TraceSet.from_path(str(tmp_path / "ts"))
    assert not ts.traces and not ts.solutions
