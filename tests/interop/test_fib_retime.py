"""Independent re-timing before promotion (issues 20 and 29, docs/interop.md): the rule on recorded
against re-timed ratios, the policy on CPU, and the retimer's CPU answer in a fresh process."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_worker.fib.confirm import NOT_ON_CPU, confirm, promotion_allowed

ROOT = Path(__file__).resolve().parents[2]


def report(ratio=0.5, noise=0.02):
    return {"stages": {"benchmark": {"shapes": [
        {"shape": {"tokens": 16, "hidden": 4096}, "default_ratio": ratio, "noise_aa": noise},
        {"shape": {"tokens": 4096, "hidden": 8192}, "default_ratio": ratio, "noise_aa": noise}]}}}


def retimed(*ratios):
    shapes = [{"tokens": 16, "hidden": 4096, "values": "normal"}, {"tokens": 4096, "hidden": 8192, "values": "normal"}]
    return {"status": "measured", "timer": "triton.do_bench_cudagraph",
            "shapes": [{"shape": s, "candidate_us": 10.0 * r, "default_us": 10.0} for s, r in zip(shapes, ratios)]}


def test_agreement_within_noise_confirms_and_an_inflated_claim_is_unconfirmed():
    assert confirm(report(0.5), retimed(0.52, 0.49))["status"] == "confirmed"
    assert confirm(report(0.5), retimed(0.3, 0.3))["status"] == "confirmed"  # faster than claimed: no block
    result = confirm(report(0.5), retimed(0.52, 0.9))  # the second shape is not the claimed 2x
    assert result["status"] == "unconfirmed"
    [finding] = result["findings"]
    assert finding["code"] == "bench:unconfirmed" and finding["shape_index"] == 1 and "0.900x" in finding["message"]
    # a noisy benchmark widens the tolerance: 2 x its A/A noise
    assert confirm(report(0.5, noise=0.3), retimed(0.52, 0.78))["status"] == "confirmed"
    assert confirm(report(0.5), {"status": "measured", "shapes": []})["status"] == "unconfirmed"


def test_the_policy_blocks_gpu_promotions_without_a_confirmation_and_says_so_on_cpu():
    assert promotion_allowed(confirm(report(), retimed(0.5, 0.5)), on_gpu=True) == (
        True, "re-timing confirmed the recorded speed-up")
    ok, why = promotion_allowed(confirm(report(), retimed(0.5, 0.9)), on_gpu=True)
    assert not ok and why.startswith("bench:unconfirmed")
    assert promotion_allowed(None, on_gpu=True)[0] is False
    unavailable = confirm(report(), {"status": "unavailable", "reason": NOT_ON_CPU})
    assert unavailable["status"] == "unavailable"
    assert promotion_allowed(unavailable, on_gpu=True)[0] is False  # a GPU deployment must be confirmed
    assert promotion_allowed(unavailable, on_gpu=False) == (True, NOT_ON_CPU)  # nothing timed, nothing inflated
    assert promotion_allowed(None, on_gpu=False) == (True, NOT_ON_CPU)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="the retimer needs torch")
def test_the_retimer_on_a_cpu_host_answers_not_confirmable():
    source = (ROOT / "gpu_worker" / "candidates" / "add_rmsnorm" / "seed.py").read_text()
    done = subprocess.run([sys.executable, "-m", "gpu_worker.fib", "retime"], cwd=ROOT, capture_output=True,
                          text=True, timeout=240, input=json.dumps({"target": "add_rmsnorm", "source": source}),
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}, check=False)
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer == {"ok": True, "status": "unavailable", "reason": NOT_ON_CPU, "timer": None, "shapes": []}


def test_the_h200_retiming_confirms_the_stored_report_and_a_slower_kernel_would_not():
    """bench/results/h200/2026-12-04-fib: do_bench_cudagraph in a fresh process against the stored H200 report
    of the same add_rmsnorm seed."""
    from gpu_worker.contract import from_json, to_json

    stored = to_json(from_json(json.loads((ROOT / "bench/results/h200/reports/add_rmsnorm__seed.json").read_text())))
    retimed_h200 = json.loads((ROOT / "bench/results/h200/2026-12-04-fib/retime_add_rmsnorm.json").read_text())
    result = confirm(stored, retimed_h200)
    assert result["status"] == "confirmed" and len(result["shapes"]) == 10
    slower = json.loads(json.dumps(retimed_h200))
    slower["shapes"][6]["candidate_us"] *= 1.5  # 4096 x 7168: 0.68 -> 1.02 of the default's time
    result = confirm(stored, slower)
    assert result["status"] == "unconfirmed" and [f["shape_index"] for f in result["findings"]] == [6]
