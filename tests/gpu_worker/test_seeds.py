"""The kernels engineer's seed candidates pass the whole CPU pipeline (CuTe: compile-only)."""

import pytest

from gpu_worker.pipeline import evaluate
from gpu_worker.targets import TARGETS

# Two seeds go through the same pipeline elsewhere, where a test asserts that they pass: a second run here
# would repeat a minute of Triton interpreter work. dsa_topk's in test_cli's evaluate test, over the whole
# range; add_rmsnorm's (its kernel, with one constexpr branch added) in tests/loop/test_loop_end_to_end.py's
# sweep, whose first candidate is the seed verified on a CPU ("unmeasured", never "incorrect").
RUN_ELSEWHERE = {("dsa_topk", "seed.py"), ("add_rmsnorm", "seed.py")}
SEEDS = [(t.name, p) for t in TARGETS.values() for p in t.seed_paths() if (t.name, p.name) not in RUN_ELSEWHERE]


@pytest.mark.slow
@pytest.mark.parametrize("target,path", SEEDS, ids=[f"{t}/{p.name}" for t, p in SEEDS])
def test_seed_candidate_passes_verification(target, path):
    report = evaluate({"candidate_id": path.name, "target": target, "source": path.read_text(), "profile": "smoke"})
    assert report["stages"]["guard"]["status"] == "pass", report["stages"]["guard"]
    verify = report["stages"]["verify"]
    expected = "compile_only" if report["stages"]["guard"]["dsl"] == "cute" and report["mode"] == "cpu" else "pass"
    assert verify["status"] == expected, verify["findings"]
    assert report["verdict"]["status"] == "pass"
