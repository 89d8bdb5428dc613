"""gpu_worker/distributed/runner.py: collecting the ranks' messages never waits on a rank that is gone."""

import os
import struct

import pytest

from gpu_worker.distributed import runner


def dies_mid_message(rank, cfg, pipes, seed_qs):
    """A rank (spawned, so importable by name) that writes the first bytes of a message and dies: the length
    header promises 10000 bytes, ten follow."""
    os.write(pipes[rank].fileno(), struct.pack("!i", 10000) + b"x" * 10)
    os._exit(3)


@pytest.mark.timeout(120)
def test_a_rank_that_dies_mid_message_ends_the_run_with_its_failure(monkeypatch):
    monkeypatch.setattr(runner, "rank_main", dies_mid_message)
    run = runner.run_ranks({"world_size": 2}, seed=1, timeout_s=100)
    assert run.failed and "exit code 3" in run.failed, run.failed
    assert not run.timed_out and run.wall_s < 100
