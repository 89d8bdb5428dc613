"""The worker's side of the independent re-timing (gpu_worker/pipeline/retime_run.py, retime_child.py): the
default is timed in a child that never sees the candidate's source, the child sends numbers only, and a CPU
host answers 'not confirmable on cpu'."""

import _thread
import threading
from pathlib import Path

from gpu_worker.pipeline import retime_child, tamper
from gpu_worker.pipeline.retime_run import DEFAULT_STUB, retime_sandboxed
from gpu_worker.pipeline.sandbox import ChildRun
from gpu_worker.targets import get_target

SOURCE = "def forward(*args):\n    return None\n"
SHAPES = [{"rows": 4, "n_ctx": 512, "k": 16, "values": "normal", "lengths": "full"},
          {"rows": 2, "n_ctx": 1024, "k": 16, "values": "normal", "lengths": "full"}]


def test_a_cpu_host_has_nothing_to_retime():
    assert retime_sandboxed({"target": "dsa_topk", "source": SOURCE}, device="cpu") == {
        "status": "unavailable", "reason": "not confirmable on cpu", "timer": None, "shapes": [], "findings": []}


def test_the_default_child_never_gets_the_candidate_and_rows_pair_both_children():
    seen = []

    def runner(cfg, *, secret, timeout_s, scratch, device):
        source = Path(cfg["candidate_path"]).read_text()
        seen.append((cfg["which"], cfg["mode"], source))
        us = 10.0 if cfg["which"] == "default" else 7.0
        return ChildRun(messages=[{"type": "load", "status": "pass"}]
                        + [{"type": "retimed", "index": i, "us": us + i, "wall_s": 1.0} for i in range(len(cfg["shapes"]))]
                        + [{"type": "done"}], returncode=0, wall_s=5.0)

    out = retime_sandboxed({"target": "dsa_topk", "source": SOURCE, "shapes": SHAPES}, device="cuda", runner=runner)
    assert seen == [("default", "retime", DEFAULT_STUB), ("candidate", "retime", SOURCE)]
    assert out["status"] == "measured" and out["findings"] == []
    assert [(r["candidate_us"], r["default_us"]) for r in out["shapes"]] == [(7.0, 10.0), (8.0, 11.0)]
    assert [r["shape"] for r in out["shapes"]] == SHAPES


class Out:
    def __init__(self):
        self.sent = []

    def send(self, **message):
        self.sent.append(message)


def test_the_child_sends_one_time_per_shape_of_the_kernel_it_was_told_to_time(monkeypatch):
    """Run in this process on CPU with a stand-in for do_bench_cudagraph: which kernel was timed is what
    `which` says; a changed harness name after the timing is sent as a tamper finding."""
    target = get_target("dsa_topk")
    timed, out = [], Out()
    clock = iter(range(100))
    perf = lambda: float(next(clock))

    def candidate(*args):
        return None

    def timer(fn, inputs):
        timed.append(fn)
        return 0.02

    # arm() wraps the thread-start functions of this process: put them back after the test
    for owner, name in ((_thread, "start_new_thread"), (_thread, "start_new"), (threading, "_start_new_thread")):
        monkeypatch.setattr(owner, name, getattr(owner, name))
    monkeypatch.setattr(tamper, "_state", None)
    tamper.arm()
    retime_child.retime_in_child({"which": "candidate", "shapes": SHAPES, "device": "cpu"}, out, target,
                                 candidate, 7, perf, timer=timer)
    assert timed == [candidate, candidate]
    assert out.sent == [{"type": "retimed", "index": 0, "us": 20.0, "wall_s": 1.0},
                        {"type": "retimed", "index": 1, "us": 20.0, "wall_s": 1.0}]
    timed.clear()
    monkeypatch.setattr(retime_child, "graph_mean_ms", lambda fn, inputs: 0.0)  # what a candidate might do
    retime_child.retime_in_child({"which": "default", "shapes": SHAPES[:1], "device": "cpu"}, out, target,
                                 candidate, 7, perf, timer=timer)
    assert timed == [target.baseline]
    assert out.sent[-1]["type"] == "tamper" and out.sent[-1]["findings"][0]["code"] == "guard:tamper"
