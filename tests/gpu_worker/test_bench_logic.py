"""The benchmark loop's bookkeeping, run on the CPU with a fake graph and fake events.

This proves the rotation, fingerprints, poison, checks and the parent's statistics fit together;
the real CUDA-graph/event path runs only on a GPU (bench/run_h200_proof.sh)."""

import time

import pytest
import torch

from gpu_worker.pipeline import bench_child
from gpu_worker.pipeline.bench_report import bench_results
from gpu_worker.pipeline.stats import ceilings_for
from gpu_worker.targets import get_target
from gpu_worker.targets.base import as_outputs

RMS = get_target("add_rmsnorm")
SHAPES = [{"tokens": 4, "hidden": 2048}, {"tokens": 9, "hidden": 4096}]


class FakeGraph:
    """Replays by calling the kernel again and writing into the captured output buffers."""

    def __init__(self, fn, inputs, outputs, stale=False):
        self.fn, self.inputs, self.outputs, self.stale = fn, inputs, outputs, stale

    def replay(self):
        if self.stale:
            return
        for dst, src in zip(self.outputs, as_outputs(self.fn(*self.inputs))):
            dst.copy_(src)


class FakeEvent:
    def record(self):
        self.t = time.perf_counter()

    def elapsed_time(self, other):
        return (other.t - self.t) * 1e3


class Sink:
    def __init__(self):
        self.messages = []

    def send(self, **m):
        self.messages.append(m)


@pytest.fixture
def fake_cuda(monkeypatch):
    stale = {"candidate": False}

    def capture(fn, inputs):
        outputs = [t.clone() for t in as_outputs(fn(*inputs))]
        return FakeGraph(fn, inputs, outputs, stale=stale["candidate"] and fn is _candidate), outputs

    monkeypatch.setattr(bench_child, "DEVICE", "cpu")
    monkeypatch.setattr(bench_child, "_capture", capture)
    monkeypatch.setattr(bench_child, "_event", FakeEvent)
    monkeypatch.setattr(bench_child, "L2_FLUSH_BYTES", 1 << 20)
    return stale


def _candidate(x, residual, weight, eps):
    return RMS.baseline(x, residual, weight, eps)


def _run(**cfg):
    sink = Sink()
    bench_child.benchmark({"profile": "smoke", "shapes": SHAPES, **cfg}, sink, RMS, _candidate, RMS.baseline,
                          RMS.baseline, seed=3, perf=time.perf_counter)
    return sink.messages


def test_an_honest_kernel_gets_medians_ratio_ci_noise_and_roofline(fake_cuda):
    messages = _run()
    assert [m["type"] for m in messages] == ["bench_shape", "bench_shape"]
    for m in messages:
        assert m["findings"] == []
        assert set(m["kernels"]) == {"candidate", "incumbent", "incumbent_aa"}
        assert m["input_sets"] >= 2 and m["rounds"] == 20
        assert all(k["stale_replays"] == 0 and k["check"]["pass"] for k in m["kernels"].values())
    findings, shapes, summary, claimed = bench_results(messages, RMS, ceilings_for("h200"), wall_s=1e9)
    assert findings == []
    for s in shapes:
        lo, hi = s["ratio_ci95"]
        assert lo <= s["ratio"] <= hi and s["noise_aa"] >= 0 and 0 < s["floor_fraction"]
        assert s["floor_us"] == pytest.approx(RMS.bytes_min(s["shape"]) / 4.25e12 * 1e6)
    assert summary["geomean_speedup"] > 0 and claimed > 0


def test_a_replay_that_does_not_rewrite_its_poisoned_output_fails(fake_cuda):
    fake_cuda["candidate"] = True
    for m in _run():
        assert "bench:wrong_output" in {f["code"] for f in m["findings"]}
        assert "NaN" in m["kernels"]["candidate"]["check"]["message"]


def test_a_kernel_that_replays_a_cached_answer_fails_the_post_timing_check(fake_cuda):
    cache = {}

    def cached(x, residual, weight, eps):
        key = (tuple(x.shape),)
        if key not in cache:
            cache[key] = RMS.baseline(x, residual, weight, eps)
        return cache[key]

    sink = Sink()
    bench_child.benchmark({"profile": "smoke", "shapes": SHAPES}, sink, RMS, cached, RMS.baseline, RMS.baseline,
                          seed=3, perf=time.perf_counter)
    assert all("bench:wrong_output" in {f["code"] for f in m["findings"]} for m in sink.messages)


def test_claiming_more_gpu_time_than_the_wall_clock_is_a_finding(fake_cuda):
    findings, *_ = bench_results(_run(), RMS, ceilings_for("h200"), wall_s=1e-6)
    assert "bench:timing_mismatch" in {f["code"] for f in findings}


def test_collect_reports_turns_a_report_into_records_and_a_table(fake_cuda, tmp_path):
    import importlib.util
    import json
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("collect_reports",
                                                  Path(__file__).resolve().parents[2] / "bench/collect_reports.py")
    collect = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(collect)
    findings, shapes, summary, _ = bench_results(_run(), RMS, ceilings_for("h200"), wall_s=1e9)
    report = {"target": "add_rmsnorm", "hardware": {"gpu": "NVIDIA H200"}, "wall_s": 12.5, "summary": summary,
              "date": "2026-12-02T12:13:54+00:00",
              "verdict": {"status": "pass", "reasons": []},
              "stages": {"verify": {"status": "pass"}, "benchmark": {"status": "pass", "shapes": shapes}}}
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "add_rmsnorm__seed.json").write_text(json.dumps(report))
    (reports / "add_rmsnorm__seed.cmd").write_text("python -m gpu_worker evaluate ...")
    assert collect.main([str(reports), str(tmp_path / "out")]) == 0
    records = json.loads((tmp_path / "out/latest.json").read_text())
    assert {r["kernel"] for r in records} == {"seed", "default"} and len(records) == 2 * len(SHAPES)
    r = records[0]
    assert r["date"] == "2026-12-02T12:13:54+00:00"
    assert set(r) >= {"target", "shape", "kernel", "median_us", "ci95_us", "floor_fraction", "gpu", "date", "command"}
    assert r["shape"] == {"tokens": 4, "hidden": 2048} and r["gpu"] == "NVIDIA H200"
    assert r["ci95_us"][0] <= r["median_us"] <= r["ci95_us"][1]
    assert "| add_rmsnorm | tokens=4, hidden=2048 | seed |" in (tmp_path / "out/latest.md").read_text()
    # a proof run whose report files did not come back: its records replace the report of the same kernel
    run = tmp_path / "run"
    run.mkdir()
    moved = [dict(r, median_us=r["median_us"] / 2) for r in records]
    (run / "latest.json").write_text(json.dumps(moved))
    (run / "evaluations.json").write_text(json.dumps(
        [dict(json.loads((tmp_path / "out/evaluations.json").read_text())[0], wall_s=9.0)]))
    assert collect.main([str(reports), str(tmp_path / "out2"), "--also", str(run)]) == 0
    merged = json.loads((tmp_path / "out2/latest.json").read_text())
    seed = sorted(r["median_us"] for r in merged if r["kernel"] == "seed")
    assert seed == sorted(r["median_us"] for r in moved if r["kernel"] == "seed")
    assert all(r["collected_from"] == str(run) for r in merged if r["kernel"] == "seed")
    assert sum(r["kernel"] == "default" for r in merged) == len(SHAPES)   # the default's records stay the report's
    (evaluation,) = json.loads((tmp_path / "out2/evaluations.json").read_text())
    assert evaluation["wall_s"] == 9.0
