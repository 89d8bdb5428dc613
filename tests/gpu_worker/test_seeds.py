"""The kernels engineer's seed candidates pass the whole CPU pipeline (CuTe: compile-only)."""

import pytest

from gpu_worker.pipeline import evaluate
from gpu_worker.targets import TARGETS

# dsa_topk's seed goes through the same pipeline, over the whole range, in test_cli's evaluate test, which
# asserts that it passes: a second run here would repeat minutes of Triton interpreter work.
RUN_BY_TEST_CLI = ("dsa_topk", "seed.py")
SEEDS = [(t.name, p) for t in TARGETS.values() for p in t.seed_paths() if (t.name, p.name) != RUN_BY_TEST_CLI]


@pytest.mark.slow
@pytest.mark.parametrize("target,path", SEEDS, ids=[f"{t}/{p.name}" for t, p in SEEDS])
def test_seed_candidate_passes_verification(target, path):
    report = evaluate({"candidate_id": path.name, "target": target, "source": path.read_text(), "profile": "smoke"})
    assert report["stages"]["guard"]["status"] == "pass", report["stages"]["guard"]
    verify = report["stages"]["verify"]
    expected = "compile_only" if report["stages"]["guard"]["dsl"] == "cute" and report["mode"] == "cpu" else "pass"
    assert verify["status"] == expected, verify["findings"]
    assert report["verdict"]["status"] == "pass"
