"""The benchmark loop's bookkeeping, run on the CPU with a fake graph and fake events.

This proves the rotation, fingerprints, poison, checks and the parent's statistics fit together;
the real CUDA-graph/event path runs only on a GPU (bench/run_h200_proof.sh)."""

import time

import pytest

from gpu_worker.pipeline import bench_child, cpu_stand_in
from gpu_worker.pipeline.bench_report import bench_results
from gpu_worker.pipeline.stats import ceilings_for
from gpu_worker.targets import get_target
from gpu_worker.targets.base import as_outputs
from tests.conftest import wait_until

RMS = get_target("add_rmsnorm")
SHAPES = [{"tokens": 4, "hidden": 2048}, {"tokens": 9, "hidden": 4096}]


@pytest.fixture
def fake_cuda(monkeypatch):
    stale = {"candidate": False}

    def capture(fn, inputs):
        return cpu_stand_in.capture(fn, inputs, stale=stale["candidate"] and fn is _candidate)

    # 12 sets: the default (64 and more) is pinned below
    cpu_stand_in.bench_on_cpu(monkeypatch.setattr, sets=12, held_out=1, capture=capture)
    return stale


def _candidate(x, residual, weight, eps):
    return RMS.baseline(x, residual, weight, eps)


def _run(**cfg):
    sink = cpu_stand_in.Messages()
    bench_child.benchmark({"profile": "smoke", "shapes": SHAPES, **cfg}, sink, RMS, _candidate, RMS.baseline,
                          RMS.baseline, seed=3, perf=time.perf_counter)
    return sink.messages


def test_every_shape_is_timed_on_at_least_64_fresh_input_sets_by_default():
    assert min(bench_child.SETS.values()) >= 64 and bench_child.HELD_OUT >= 1


def test_an_honest_kernel_gets_means_tails_ratio_ci_noise_and_roofline(fake_cuda):
    messages = _run()
    assert [m["type"] for m in messages] == ["bench_shape"] * (len(SHAPES) + 1)
    assert [m["held_out"] for m in messages] == [False] * len(SHAPES) + [True]
    for m in messages:
        assert m["findings"] == [] and m["check"] == {"pass": True, "failures": 0}
        assert set(m["kernels"]) == {"candidate", "incumbent", "incumbent_aa"}
        assert m["input_sets"] == m["rounds"] == 12
        assert all(len(k["times_us"]) == 12 for k in m["kernels"].values())
    findings, shapes, summary, claimed = bench_results(messages, RMS, ceilings_for("h200"), wall_s=1e9)
    assert findings == []
    for s in shapes:
        lo, hi = s["ratio_ci95"]
        assert lo <= s["ratio"] <= hi and s["ratio_of"] == "mean" and s["noise_aa"] >= 0 and 0 < s["floor_fraction"]
        c = s["candidate"]
        assert c["min_us"] <= c["q1_us"] <= c["median_us"] <= c["q3_us"] <= c["p99_us"] <= c["max_us"]
        assert c["mean_ci95_us"][0] <= c["mean_us"] <= c["mean_ci95_us"][1] and c["calls"] == 12
        assert 0 <= c["slow_fraction"] <= 1 and s["tail_ratio"] > 0
        assert s["floor_us"] == pytest.approx(RMS.bytes_min(s["shape"]) / 4.25e12 * 1e6)
        assert "faster" not in s and "delta" not in s          # the policy decides, not the GPU side
    assert summary["geomean_speedup"] > 0 and summary["held_out_geomean"] > 0 and claimed > 0


def test_every_timed_set_is_a_fresh_draw_from_each_value_family(fake_cuda):
    seen = []

    def recording(x, residual, weight, eps):
        seen.append(float(x.float().abs().sum()))
        return RMS.baseline(x, residual, weight, eps)

    sink = cpu_stand_in.Messages()
    bench_child.benchmark({"profile": "smoke", "shapes": SHAPES[:1]}, sink, RMS, recording, RMS.baseline,
                          RMS.baseline, seed=3, perf=time.perf_counter)
    assert sink.messages[0]["findings"] == []
    assert len(set(seen)) >= 12                                # a different input on every timed replay
    families = {bench_child.set_inputs(RMS, SHAPES[0], 3, 0, j, "cpu")[0].abs().max().item() for j in range(6)}
    assert len(families) > 1


def test_a_replay_that_does_not_rewrite_its_poisoned_output_fails(fake_cuda):
    fake_cuda["candidate"] = True
    for m in _run():
        assert "bench:wrong_output" in {f["code"] for f in m["findings"]}
        assert "NaN" in m["findings"][0]["message"]


def test_a_kernel_that_replays_a_cached_answer_fails_on_fresh_inputs(fake_cuda):
    cache = {}

    def cached(x, residual, weight, eps):
        key = (tuple(x.shape),)
        if key not in cache:
            cache[key] = RMS.baseline(x, residual, weight, eps)
        return cache[key]

    sink = cpu_stand_in.Messages()
    bench_child.benchmark({"profile": "smoke", "shapes": SHAPES}, sink, RMS, cached, RMS.baseline, RMS.baseline,
                          seed=3, perf=time.perf_counter)
    for m in sink.messages:
        codes = {f["code"] for f in m["findings"]}
        assert codes & {"bench:stale_output", "bench:wrong_output"}, m["findings"]


def test_a_graph_that_copies_an_answer_computed_at_capture_is_stale(fake_cuda, monkeypatch):
    """The memo family: the candidate computes the right answer for the capture-time inputs and the
    captured graph only copies it. Fresh inputs after capture expose it."""
    def capture(fn, inputs):
        answer = [t.clone() for t in as_outputs(fn(*inputs))]
        outputs = [t.clone() for t in answer]

        class Copy:
            def replay(self):
                for dst, src in zip(outputs, answer):
                    dst.copy_(src)
        return (Copy() if fn is _candidate else cpu_stand_in.FakeGraph(fn, inputs, outputs)), outputs

    monkeypatch.setattr(bench_child, "_capture", capture)
    for m in _run():
        assert "bench:stale_output" in {f["code"] for f in m["findings"]}, m["findings"]


def test_a_slow_tail_shows_in_p99_and_the_slow_fraction(fake_cuda):
    _, shapes, *_ = bench_results([{
        "type": "bench_shape", "index": 0, "shape": SHAPES[0], "findings": [], "rounds": 64, "input_sets": 64,
        "kernels": {"candidate": {"times_us": [10.0] * 62 + [600.0, 610.0]},
                    "incumbent": {"times_us": [40.0] * 64}, "incumbent_aa": {"times_us": [40.0] * 64}}}],
        RMS, ceilings_for("h200"), wall_s=1e9)
    (s,) = shapes
    assert s["candidate"]["median_us"] == 10.0 and s["candidate"]["p99_us"] > 500
    assert s["candidate"]["slow_fraction"] == pytest.approx(2 / 64)
    assert s["candidate"]["mean_us"] == pytest.approx((62 * 10 + 1210) / 64)
    assert s["tail_ratio"] > 10 and s["ratio"] == pytest.approx(s["candidate"]["mean_us"] / 40.0)


def test_a_hung_capture_ends_the_child_with_its_own_finding(monkeypatch):
    fired = {}
    monkeypatch.setattr(bench_child.os, "_exit", lambda code: fired.setdefault("code", code))
    sink = cpu_stand_in.Messages()
    with bench_child._Watchdog(sink, 0.05, "bench:graph_capture", "CUDA graph capture of the candidate"):
        wait_until(lambda: "code" in fired, timeout_s=10, interval_s=0.01)
    assert fired["code"] == 3 and sink.messages[0]["code"] == "bench:graph_capture"


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
    _, shapes, summary, _ = bench_results(_run(), RMS, ceilings_for("h200"), wall_s=1e9)
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
    assert {r["kernel"] for r in records} == {"seed", "default"} and len(records) == 2 * (len(SHAPES) + 1)
    assert sum(r["held_out"] for r in records) == 2
    r = records[0]
    assert r["date"] == "2026-12-02T12:13:54+00:00"
    assert set(r) >= {"target", "shape", "kernel", "mean_us", "mean_ci95_us", "median_us", "p99_us", "slow_fraction",
                      "floor_fraction", "gpu", "date", "command"}
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
    assert sum(r["kernel"] == "default" for r in merged) == len(SHAPES) + 1   # the default's stay the report's
    (evaluation,) = json.loads((tmp_path / "out2/evaluations.json").read_text())
    assert evaluation["wall_s"] == 9.0


def test_events_that_claim_more_than_their_replay_block_took_are_a_finding(fake_cuda):
    def block_findings(messages):
        return [f for f in bench_results(messages, RMS, None, wall_s=1e9)[0]
                if f["code"] == "bench:timing_mismatch" and "in a block" in f["message"]]

    messages = _run()
    assert not block_findings(messages)  # events inside the block never add up to more than the block
    messages[0]["timed_wall_s"] = 1e-9  # the block's wall time, far below what its events add up to
    assert [f.get("shape_index") for f in block_findings(messages)] == [0]


def test_a_candidate_that_tampers_at_capture_is_reported_by_the_benchmark(fake_cuda, monkeypatch):
    from gpu_worker.pipeline import tamper

    calls = []

    def check():
        calls.append(1)
        return [{"code": "guard:tamper", "message": "the candidate changed torch.cuda.synchronize"}]

    monkeypatch.setattr(tamper, "check", check)
    messages = [m for m in _run() if m["type"] == "bench_shape"]
    assert len(calls) >= 2 * len(messages)  # after the candidate's capture and after each replay block
    for m in messages:
        assert [f["code"] for f in m["findings"]] == ["guard:tamper"]  # reported once per shape, not per check


def _bench_codes(candidate) -> set[str]:
    sink = cpu_stand_in.Messages()
    bench_child.benchmark({"profile": "smoke", "shapes": SHAPES[:1]}, sink, RMS, candidate, RMS.baseline,
                          RMS.baseline, seed=5, perf=time.perf_counter)
    return {f["code"] for m in sink.messages if m["type"] == "bench_shape" for f in m["findings"]}


def _wrong(x, residual, weight, eps):
    out = RMS.baseline(x, residual, weight, eps)
    return tuple(t + 1 for t in out) if isinstance(out, tuple) else out + 1


def test_the_benchmark_side_exploit_families_fail_on_the_cpu_replica(fake_cuda):
    """Each family of tests/redteam/candidates/bench_* as a plain function; the fake graph calls the function
    again on every replay, as a real graph replays the kernels its one captured call launched."""
    calls, memo, start = [], {}, time.perf_counter()

    def nth_call(*a):  # exact for the first calls (the warm-up and capture), then wrong
        calls.append(1)
        return _wrong(*a) if len(calls) > 3 else RMS.baseline(*a)

    def after_a_while(*a):  # exact until the timed replays are under way
        return _wrong(*a) if time.perf_counter() - start > 0.05 else RMS.baseline(*a)

    def pointer_memo(*a):  # the answer of the first inputs seen at these buffers, kept for those buffers
        key = a[0].data_ptr()
        memo.setdefault(key, [t.clone() for t in as_outputs(RMS.baseline(*a))])
        return tuple(memo[key])

    skipped = []

    def skips_calls(*a):  # every other call returns the previous answer without computing
        if skipped and len(skipped) % 2 == 0:
            skipped.append(skipped[-1])
        else:
            skipped.append([t.clone() for t in as_outputs(RMS.baseline(*a))])
        return tuple(skipped[-1])

    assert _bench_codes(nth_call) & {"bench:wrong_output"}
    start = time.perf_counter()
    assert _bench_codes(after_a_while) & {"bench:wrong_output"}
    assert _bench_codes(pointer_memo) & {"bench:stale_output"}
    assert _bench_codes(skips_calls) & {"bench:stale_output", "bench:wrong_output"}
    assert not _bench_codes(_candidate) & {"bench:stale_output", "bench:wrong_output"}  # honest stays clean


def test_each_kernel_reports_its_mean_per_value_family(fake_cuda):
    _, shapes, *_ = bench_results(_run(), RMS, None, wall_s=1e9)
    for entry in shapes:
        assert set(entry["candidate"]["family_mean_us"]) == set(RMS.value_families)
        assert all(v > 0 for v in entry["incumbent"]["family_mean_us"].values())


def test_a_default_that_cannot_be_captured_stops_the_benchmark_with_a_harness_finding(fake_cuda, monkeypatch):
    # seen on the H200 (2026-12-05): an imported Definition's reference broke its capture, which left the CUDA
    # RNG mid-capture, and every later shape failed on drawing its inputs; the benchmark now stops there
    def capture(fn, inputs):
        if fn is not _candidate:
            raise RuntimeError("operation not permitted when stream is capturing")
        return cpu_stand_in.capture(fn, inputs)

    monkeypatch.setattr(bench_child, "_capture", capture)
    messages = _run()
    assert len(messages) == 1, [m["shape"] for m in messages]
    assert [f["code"] for f in messages[0]["findings"]] == ["bench:harness_error"]
    assert "stops at this shape" in messages[0]["findings"][0]["message"]


def _timed_with_slow_syncs(monkeypatch, slow_syncs: int):
    """_host_timed over an instant replay whose first `slow_syncs` synchronisations wait 2 ms: GPU work that
    finishes after the replay's end event, as seen from the host."""
    calls = {"n": 0}

    def sync():
        calls["n"] += 1
        end = time.perf_counter() + (0.002 if calls["n"] <= slow_syncs else 0)
        while time.perf_counter() < end:  # a busy wait: the retry's pause is patched out below
            pass

    cpu_stand_in.bench_on_cpu(monkeypatch.setattr, sets=12, held_out=1)
    monkeypatch.setattr(bench_child, "_sync", sync)
    monkeypatch.setattr(bench_child.time, "sleep", lambda s: None)
    return bench_child._host_timed(lambda: None, time.perf_counter)


def test_work_outside_the_events_of_the_host_timed_replays_is_a_gap_on_every_try(monkeypatch):
    host, events = _timed_with_slow_syncs(monkeypatch, slow_syncs=10 ** 6)
    assert host > 2000 and events < 100
    assert bench_child.stats.host_gap(host, events)


def test_a_slow_spell_of_the_host_is_retried_instead_of_failing_an_honest_kernel(monkeypatch):
    # the whole first block of host-timed replays is slow (two syncs per replay), the second is not
    host, events = _timed_with_slow_syncs(monkeypatch, slow_syncs=2 * bench_child.HOST_REPLAYS)
    assert not bench_child.stats.host_gap(host, events) and host < 1000


def test_the_host_check_compares_the_host_timed_replays_with_their_own_events(fake_cuda):
    messages = _run()
    k = messages[0]["kernels"]["candidate"]
    assert k["host_event_us"] is not None and k["host_event_us"] <= k["host_us"]
    k["host_us"], k["host_event_us"] = 5000.0, 10.0   # the events of the same replays saw a tenth of it
    findings = bench_results(messages, RMS, None, wall_s=1e9)[0]
    assert [f["shape_index"] for f in findings if "host wall time" in f["message"]] == [0]
    k["host_event_us"] = 4000.0                        # a slow input set, seen alike by both clocks
    findings = bench_results(messages, RMS, None, wall_s=1e9)[0]
    assert not [f for f in findings if "host wall time" in f["message"]]


@pytest.mark.parametrize("kernels", [2, 3, 4])
@pytest.mark.parametrize("families", [1, 2, 3, 4, 5, 6, 7])
def test_the_rotation_gives_each_kernel_each_place_and_every_family_every_place(kernels, families):
    """With a fixed rotation (who goes first = j mod kernels) and six families, the candidate went first only on
    two families: a place's bias read as a family's slowness (docs/benchmark.md, "The place in the order")."""
    n = kernels * families * kernels
    firsts = [bench_child.rotation(j, kernels, families) for j in range(n)]
    assert all(firsts.count(k) == n // kernels for k in range(kernels))
    for f in range(families):
        assert {firsts[j] for j in range(f, n, families)} == set(range(kernels)), f


def test_each_timed_call_records_its_place_and_the_report_gives_a_mean_per_place(fake_cuda):
    messages = _run()
    m = messages[0]
    families = [bench_child.set_family(RMS, m["shape"], j) for j in range(12)]
    for name, k in m["kernels"].items():
        assert sorted(k["places"]) == [0] * 4 + [1] * 4 + [2] * 4, name
    cand = m["kernels"]["candidate"]["places"]
    assert all({q for q, f in zip(cand, families) if f == fam} == {0, 1, 2} for fam in set(families))
    _, shapes, _, _ = bench_results(messages, RMS, ceilings_for("h200"), wall_s=1e9)
    for s in shapes:
        for name in ("candidate", "incumbent", "incumbent_aa"):
            means = s[name]["place_mean_us"]
            assert len(means) == 3 and min(means) <= s[name]["mean_us"] <= max(means)
