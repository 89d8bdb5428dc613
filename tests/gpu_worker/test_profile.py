"""Where the time goes: the profiler trace's aggregation (pipeline/profile.py) on a canned trace, the
roofline's achieved fractions, and the way both reach the report."""

import pytest
import torch

from gpu_worker import contract
from gpu_worker.pipeline import profile, stats


def _runtime(name, corr, ts):
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "ts": ts, "dur": 4.0, "args": {"correlation": corr}}


def _gpu(name, corr, ts, dur, cat="kernel"):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "args": {"correlation": corr, "stream": 7}}


def canned_trace():
    """Two replays of a graph (a Triton top-k in two kernels and a memset), each after an L2 flush
    launched eagerly: the shape of what torch.profiler's export_chrome_trace writes."""
    events = [{"ph": "M", "name": "process_name", "args": {"name": "python"}}]
    for r, base in enumerate((0, 1000)):
        flush, graph = 10 + 2 * r, 11 + 2 * r
        events += [
            _runtime("cudaLaunchKernel", flush, base),
            _gpu("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<unsigned char>>",
                 flush, base + 5, 60.0),
            _runtime("cudaGraphLaunch", graph, base + 100),
            _gpu("_topk_histogram_kernel", graph, base + 170, 9.0 + r),
            _gpu("_topk_select_kernel", graph, base + 180, 3.0),
            _gpu("Memset (Device)", graph, base + 184, 1.0, cat="gpu_memset"),
            {"ph": "X", "cat": "cpu_op", "name": "aten::zero_", "ts": base, "dur": 6.0},
        ]
    return {"schemaVersion": 1, "traceEvents": events}


def test_only_the_graphs_kernels_count_per_replay_largest_first():
    got = profile.aggregate(canned_trace(), replays=2)
    assert got["graph_only"] and got["replays"] == 2
    names = [k["name"] for k in got["kernels"]]
    assert names == ["_topk_histogram_kernel", "_topk_select_kernel", "Memset (Device)"]  # no flush, no cpu op
    hist = got["kernels"][0]
    assert hist["us"] == pytest.approx(9.5) and hist["launches"] == 1
    assert got["kernel_us"] == pytest.approx(13.5)
    assert sum(k["share"] for k in got["kernels"]) == pytest.approx(1.0)
    assert hist["share"] == pytest.approx(9.5 / 13.5)


def test_without_graph_launches_every_gpu_event_counts_and_the_tail_is_summed():
    trace = {"traceEvents": [_gpu(f"k{i}", i, i * 10, float(i + 1)) for i in range(5)]}
    got = profile.aggregate(trace, replays=1, top=2)
    assert not got["graph_only"]
    assert [k["name"] for k in got["kernels"]] == ["k4", "k3", "other (3 kernels)"]
    assert got["kernels"][-1]["us"] == pytest.approx(1 + 2 + 3)
    assert got["kernel_us"] == pytest.approx(15.0)


def test_the_slowest_family_is_profiled_only_when_it_is_much_slower():
    families = ["normal", "ties", "relu"] * 4
    times = [50.0, 140.0, 60.0] * 4        # ties 2.8x the fastest family: profiled on its first set
    assert profile.slowest_family(times, families) == {"family": "ties", "mean_us": 140.0, "first_set": 1}
    even = [50.0, 70.0, 60.0] * 4          # 1.4x: the families cost alike, one profile says enough
    assert profile.slowest_family(even, families) is None
    assert profile.slowest_family(times, ["normal"] * 12) is None and profile.slowest_family(times, None) is None
    # one slow call in a family's 21 (128 sets over six families) does not make it slow: the mean decides
    many = ["normal", "ties", "relu"] * 21
    spike = [50.0, 52.0, 51.0] * 20 + [50.0, 300.0, 51.0]
    assert profile.slowest_family(spike, many) is None


def test_an_empty_trace_has_no_kernels_and_no_shares():
    got = profile.aggregate({"traceEvents": []}, replays=3)
    assert got["kernels"] == [] and got["kernel_us"] == 0.0


def test_the_roofline_says_which_ceiling_a_kernel_is_short_of():
    ceil = stats.ceilings_for("h200")
    r = stats.roofline(4_250_000, 0, 2.0, ceil)  # 1 us of bytes at 4.25 TB/s, done in 2 us
    assert r["bytes_fraction"] == pytest.approx(0.5) and r["flops_fraction"] == 0.0
    c = stats.roofline(1000, 1400e6, 4.0, ceil)  # 2 us of FLOPs at 700 TFLOP/s, done in 4 us
    assert c["bound"] == "compute" and c["flops_fraction"] == pytest.approx(0.5)
    assert c["floor_fraction"] == pytest.approx(max(c["bytes_fraction"], c["flops_fraction"]))
    assert stats.roofline(1000, 0, 1.0, None)["bytes_fraction"] is None


def test_a_shape_with_a_profile_fits_the_report_contract():
    shape = contract.BenchShape.from_dict({"shape": {"m": 1}, "bytes_fraction": 0.4, "flops_fraction": 0.0,
                                           "profile": profile.aggregate(canned_trace(), replays=2)})
    assert shape.to_dict()["profile"]["kernels"][0]["name"] == "_topk_histogram_kernel"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the profiler's CUDA activity needs a GPU")
def test_on_a_gpu_a_captured_graph_is_profiled_without_the_flush():
    x = torch.randn(1 << 20, device="cuda")
    flush = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    graph = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y = x * 2
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        y = x * 2
    got = profile.capture(graph.replay, flush.zero_)
    assert got["graph_only"] and len(got["kernels"]) == 1 and got["kernel_us"] > 0
    del y
