"""Stand-ins that let the bench child's loop (bench_child.benchmark) run in this process on a CPU: a graph
whose replay calls the kernel again into the captured outputs, events read from the host clock, and a
writer that keeps the messages. They check the loop's bookkeeping (rotation, checks, grouping, reports);
the times they give mean nothing. Used by tests/gpu_worker and by bench/aa_h200.py's --cpu check; the real
graph and event path runs only on a GPU."""

from __future__ import annotations

import time

from ..targets.base import as_outputs
from . import bench_child


class Messages:
    """In place of protocol.Writer: keeps every message a child would have sent."""

    def __init__(self):
        self.messages: list[dict] = []

    def send(self, **message) -> None:
        self.messages.append(message)


class FakeGraph:
    """A replay calls the kernel again and writes into the captured output buffers; a stale one does nothing,
    as a graph whose kernel ignores new input values would."""

    def __init__(self, fn, inputs, outputs, stale: bool = False):
        self.fn, self.inputs, self.outputs, self.stale = fn, inputs, outputs, stale

    def replay(self) -> None:
        if self.stale:
            return
        for dst, src in zip(self.outputs, as_outputs(self.fn(*self.inputs))):
            dst.copy_(src)


class FakeEvent:
    def record(self) -> None:
        self.t = time.perf_counter()

    def elapsed_time(self, other) -> float:
        return (other.t - self.t) * 1e3


def capture(fn, inputs, stale: bool = False):
    """bench_child._capture's stand-in: the graph and the outputs it writes."""
    outputs = [t.clone() for t in as_outputs(fn(*inputs))]
    return FakeGraph(fn, inputs, outputs, stale=stale), outputs


def bench_on_cpu(set_attr, *, sets: int, held_out: int, capture=capture) -> None:
    """Point bench_child at the stand-ins, through `set_attr` (setattr, or a test's monkeypatch.setattr):
    `sets` input sets per shape, `held_out` drawn shapes, a 1 MiB cache flush."""
    for name, value in (("DEVICE", "cpu"), ("_capture", capture), ("_event", FakeEvent),
                        ("L2_FLUSH_BYTES", 1 << 20), ("SETS", {"smoke": sets}), ("HELD_OUT", held_out)):
        set_attr(bench_child, name, value)
