"""bench/redteam_gpu.py, the red team's runner on a GPU host, run here on two candidates the guard stops (no
GPU work): a second call with --resume keeps the first call's results and runs only what it did not reach."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("redteam_gpu", ROOT / "bench/redteam_gpu.py")
redteam_gpu = importlib.util.module_from_spec(spec)
spec.loader.exec_module(redteam_gpu)

FIRST, SECOND = "guard_dunder_hook_tuple", "guard_format_field_env"


def test_a_resumed_run_keeps_the_earlier_results_and_runs_the_rest(tmp_path, monkeypatch):
    ran = []
    real = redteam_gpu.evaluate
    monkeypatch.setattr(redteam_gpu, "evaluate", lambda spec: ran.append(spec["candidate_id"]) or real(spec))
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    assert redteam_gpu.main([str(first), FIRST]) == 0
    assert redteam_gpu.main([str(second), "--resume", str(first), FIRST, SECOND]) == 0
    assert ran == [FIRST, SECOND]  # the first candidate was not run again
    results = json.loads(second.read_text())
    assert [r["name"] for r in results] == [FIRST, SECOND]
    assert results[0] == json.loads(first.read_text())[0] and all(r["ok"] for r in results)
