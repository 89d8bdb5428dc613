"""Every cheating candidate in candidates/ gets the finding its header names; the honest ones pass.

Each file's docstring says `target: <name>` and `expect: <code>[|<code>...]` (or `pass`), and
`gpu-only` for hacks that only a GPU run can expose (CUDA-graph capture, timing). On an H200 they run
through bench/redteam_gpu.py; what each got there is in bench/results/h200/redteam_gpu.md."""

import re
from pathlib import Path

import pytest

from gpu_worker.pipeline import evaluate

CANDIDATES = Path(__file__).parent / "candidates"


def _cuda() -> bool:
    import torch
    return torch.cuda.is_available()


def _header(path: Path) -> dict:
    text = path.read_text()
    doc = text.split('"""')[1]
    target = re.search(r"^target: (\S+)", doc, re.M)
    return {"target": target.group(1) if target else _target_from_name(path.name),
            "expect": re.search(r"expect: (\S+)", doc).group(1).split("|"), "gpu": "gpu-only" in doc,
            "source": text}


def _target_from_name(name: str) -> str:
    return "dsa_indexer_topk" if "indexer" in name else "add_rmsnorm" if "rmsnorm" in name else "dsa_topk"


def _params():
    for path in sorted(CANDIDATES.glob("*.py")):
        h = _header(path)
        marks = [pytest.mark.gpu, pytest.mark.skipif(not _cuda(), reason="needs a CUDA GPU")] if h["gpu"] else []
        if not any(c.startswith("guard:") for c in h["expect"]):
            marks.append(pytest.mark.slow)
        yield pytest.param(path, id=path.stem, marks=marks)


@pytest.mark.parametrize("path", list(_params()))
def test_candidate_gets_the_finding_its_header_names(path):
    h = _header(path)
    spec = {"candidate_id": path.stem, "attempt": 1, "target": h["target"], "source": h["source"],
            "incumbent_source": None, "profile": "smoke"}
    if "verify:timeout" in h["expect"]:
        spec["verify_timeout_s"] = 20
    report = evaluate(spec)
    verdict = report["verdict"]
    if h["expect"] == ["pass"]:
        assert verdict["status"] == "pass", verdict
        assert report["stages"]["verify"]["status"] == "pass"
        return
    assert verdict["status"] == "fail", verdict
    assert set(h["expect"]) & set(verdict["reasons"]), (h["expect"], verdict)
