"""import_reports: GPU reports committed to the repository load as a finished, labelled run."""

import json

import pytest
from django.core.management import CommandError, call_command

from loop.models import Run
from tests.loop.reports import crossover_report, report, shape_result


@pytest.fixture
def h200_results(tmp_path):
    folder = tmp_path / "h200"
    folder.mkdir()
    best = crossover_report(candidate_id="best")
    best["source"] = "import triton\n\n@triton.jit\ndef k():\n    pass\n\ndef forward(a, b, c):\n    pass\n"
    (folder / "dsa_topk-best.json").write_text(json.dumps(best))
    (folder / "dsa_topk-slow.json").write_text(json.dumps(report(candidate_id="slow",
                                                                 shapes=[shape_result(4, 4096, 1.2)])))
    (folder / "latest.json").write_text(json.dumps([
        {"target": "dsa_topk", "shape": {"rows": 4, "n_ctx": 131072}, "kernel": "default", "median_us": 103.0,
         "ci95_us": [101.0, 105.0], "floor_fraction": 0.02, "gpu": "NVIDIA H200", "date": "2026-12-02",
         "command": "python -m gpu_worker bench dsa_topk"}]))
    return folder


def test_reports_load_as_a_finished_run_labelled_with_device_and_date(h200_results, topk_target, alice, capsys):
    call_command("import_reports", str(h200_results), user="alice")
    run = Run.objects.get()
    assert (run.status, run.imported_from, run.imported_device, run.imported_date) == (
        "finished", str(h200_results), "NVIDIA H200", "2026-12-02")
    assert run.hardware == "h200" and "Imported" in run.notice
    assert [(c.status, c.reason_code) for c in run.candidates.order_by("number")] == [
        ("kept", "faster"), ("reverted", "slower")]
    assert run.incumbent.proposal["label"] == "best"
    assert run.proposer_settings["records"][0]["median_us"] == 103.0
    assert run.candidates.get(number=1).evaluations.get().report["stages"]["benchmark"]["shapes"][0]["ratio"] == 0.6
    assert "1 kept" in capsys.readouterr().out


def test_importing_the_same_files_twice_is_a_no_op(h200_results, topk_target, alice, capsys):
    call_command("import_reports", str(h200_results), user="alice")
    call_command("import_reports", str(h200_results), user="alice")
    assert Run.objects.count() == 1
    assert "already imported" in capsys.readouterr().out


def test_a_folder_without_reports_is_refused(tmp_path, topk_target, alice):
    with pytest.raises(CommandError, match="no ark.report/2 or ark.report/1 reports"):
        call_command("import_reports", str(tmp_path), user="alice")
