"""An imported target goes through the whole pipeline on CPU as a built-in one does: guard, the sandboxed
verify child built from the document the spec carries, and a wrong kernel is refused (docs/interop.md)."""

import json
from pathlib import Path

import pytest

pytest.importorskip("flashinfer_bench", reason="the fib extra (flashinfer-bench) is not installed")

from gpu_worker.fib.reader import build_document
from gpu_worker.pipeline import evaluate

ROOT = Path(__file__).resolve().parents[2]
SEED = (ROOT / "gpu_worker" / "candidates" / "add_rmsnorm" / "seed.py").read_text()
KERNEL = SEED.replace("def forward(x, residual, weight, eps):", "def _forward_eps(x, residual, weight, eps):") + (
    "\n\ndef forward(hidden_states, residual, weight):\n"
    "    return _forward_eps(hidden_states, residual, weight, 1e-6)\n")


def spec(source: str) -> dict:
    text = (ROOT / "gpu_worker" / "fib" / "definitions" / "fused_add_rmsnorm_h4096.json").read_text()
    doc = build_document(text, "", ["batch_size=1:4096"])
    return {"candidate_id": "fib1", "target": "fused_add_rmsnorm_h4096", "profile": "smoke", "e2e": False,
            "source": source, "target_document": json.loads(json.dumps(doc))}


@pytest.mark.slow
def test_the_seed_kernel_passes_an_imported_target_and_a_wrong_one_fails(few_verify_shapes):
    report = evaluate(spec(KERNEL))
    verify = report["stages"]["verify"]
    assert report["stages"]["guard"]["status"] == "pass", report["stages"]["guard"]
    assert verify["status"] == "pass", verify
    assert len(verify["shapes"]) == 2 and all(s["pass"] for s in verify["shapes"])
    assert report["target"] == "fused_add_rmsnorm_h4096" and report["verdict"]["status"] == "pass"
    wrong = KERNEL.replace("y = hf * rstd[:, None] * w[None, :]", "y = hf * rstd[:, None] * w[None, :] * 1.05")
    assert wrong != KERNEL
    report = evaluate(spec(wrong))
    assert report["stages"]["verify"]["status"] == "fail"
    assert report["verdict"]["status"] == "fail"
    message = next(s["message"] for s in report["stages"]["verify"]["shapes"] if s["pass"] is False)
    assert "beyond atol" in message


def test_a_spec_whose_document_names_another_target_is_refused():
    bad = dict(spec(KERNEL), target="add_rmsnorm")
    report = evaluate(bad)
    assert report["verdict"]["status"] == "error" and "spec:unknown_target" in report["verdict"]["reasons"]


def test_a_torch_norm_shortcut_is_refused_by_the_guard_on_an_imported_target():
    cheat = ("import torch\nimport triton\nimport triton.language as tl\nPARAMS = {}\n\n@triton.jit\ndef _k(x):\n"
             "    pass\n\ndef forward(hidden_states, residual, weight):\n    h = hidden_states + residual\n"
             "    return h, torch.nn.functional.rms_norm(h, (h.shape[-1],), weight, 1e-6)\n")
    report = evaluate(spec(cheat))
    assert report["stages"]["guard"]["status"] == "fail", report["stages"]["guard"]


def test_the_cli_evaluates_an_imported_definition_without_python(tmp_path, capsys):
    """`python -m gpu_worker evaluate --definition`: the GPU host's way to run ark's pipeline on a Definition
    (bench/fib_eval_h200.sh); a wrong name or a missing range is a one-line error, not a traceback."""
    from gpu_worker.cli import main

    kernel = tmp_path / "kernel.py"
    kernel.write_text(KERNEL)
    definition = str(ROOT / "gpu_worker" / "fib" / "definitions" / "fused_add_rmsnorm_h4096.json")
    out = tmp_path / "report.json"
    rc = main(["evaluate", "--target", "fused_add_rmsnorm_h4096", "--candidate", str(kernel), "--definition",
               definition, "--range", "batch_size=1:16", "--out", str(out)])
    report = json.loads(out.read_text())
    assert rc == 0 and report["verdict"]["status"] == "pass", report["verdict"]
    assert report["stages"]["verify"]["status"] == "pass" and report["target"] == "fused_add_rmsnorm_h4096"
    capsys.readouterr()
    assert main(["evaluate", "--target", "add_rmsnorm", "--candidate", str(kernel), "--definition", definition,
                 "--range", "batch_size=1:16"]) == 2
    assert "the definition is named fused_add_rmsnorm_h4096" in capsys.readouterr().err
    assert main(["evaluate", "--target", "fused_add_rmsnorm_h4096", "--candidate", str(kernel),
                 "--definition", definition]) == 2
    assert "no operating range for var axis batch_size" in capsys.readouterr().err
