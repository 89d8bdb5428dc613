"""Every cheating candidate in candidates/ gets the finding its header names; the honest ones pass.

Each file's docstring says `target: <name>` and `expect: <code>[|<code>...]` (or `pass`), and
`gpu-only` for hacks that only a GPU run can expose (CUDA-graph capture, timing); catalog.py reads it and
bundles the candidates that are a shared kernel of kernels/ with one shortcut. On an H200 they run
through bench/redteam_gpu.py; what each got there is in bench/results/h200/ (INDEX.md lists the records)."""

import pytest

from gpu_worker.pipeline import evaluate
from tests.redteam.catalog import all_candidates


def _cuda() -> bool:
    import torch
    return torch.cuda.is_available()


def _params():
    for c in all_candidates():
        marks = [pytest.mark.gpu, pytest.mark.skipif(not _cuda(), reason="needs a CUDA GPU")] if c.gpu_only else []
        if not any(e.startswith("guard:") for e in c.expect):
            marks.append(pytest.mark.slow)
        yield pytest.param(c, id=c.name, marks=marks)


@pytest.mark.parametrize("c", list(_params()))
def test_candidate_gets_the_finding_its_header_names(c):
    spec = {"candidate_id": c.name, "attempt": 1, "target": c.target, "source": c.source,
            "incumbent_source": None, "profile": "smoke"}
    if "verify:timeout" in c.expect:
        spec["verify_timeout_s"] = 5       # the child is up in ~2 s on a loaded 2-core machine; the rest spins
    report = evaluate(spec)
    verdict = report["verdict"]
    if c.expect == ("pass",):
        assert verdict["status"] == "pass", verdict
        assert report["stages"]["verify"]["status"] == "pass"
        return
    assert verdict["status"] == "fail", verdict
    assert set(c.expect) & set(verdict["reasons"]), (c.expect, verdict)
