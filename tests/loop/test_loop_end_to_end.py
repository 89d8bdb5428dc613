"""The loop end to end with real parts: Redis, a loop worker, a GPU worker in CPU mode running the
real pipeline. A sweep proposes, the GPU side verifies, the policy reverts, the database tells the
whole story; a GPU worker killed mid-evaluation loses no candidate and counts none twice."""

from pathlib import Path

import pytest

from loop.audit import verify_chain
from loop.models import Candidate, Evaluation, Event, OutboxMessage, Run, Thesis
from loop.services.reaper import reap
from loop.services.runs import run_start
from loop.services.targets import target_sync
from tests.conftest import GPU_WORKER_CMD, wait_until

pytest.importorskip("gpu_worker.pipeline", reason="the harness pipeline is not importable yet")

ROOT = Path(__file__).resolve().parents[2]
SEED = (ROOT / "gpu_worker/candidates/add_rmsnorm/seed.py").read_text()
# The seed with a knob that breaks it: SKIP_WEIGHT=1 forgets to multiply by the weight.
BUGGY_SEED = (SEED
              .replace('PARAMS = {"ROWS": 1, "num_warps": 8}', 'PARAMS = {"ROWS": 1, "num_warps": 4, "SKIP_WEIGHT": 0}')
              .replace('SPACE = {"ROWS": [1, 2, 4], "num_warps": [4, 8, 16, 32]}',
                       'SPACE = {"SKIP_WEIGHT": [0, 1]}')
              .replace("ROWS: tl.constexpr, BLOCK_D: tl.constexpr):",
                       "ROWS: tl.constexpr, BLOCK_D: tl.constexpr, SKIP_WEIGHT: tl.constexpr):")
              .replace("    y = hf * rstd[:, None] * w[None, :]\n",
                       "    y = hf * rstd[:, None] * w[None, :]\n    if SKIP_WEIGHT:\n        y = hf * rstd[:, None]\n")
              .replace("ROWS=ROWS, BLOCK_D=", 'ROWS=ROWS, SKIP_WEIGHT=PARAMS["SKIP_WEIGHT"], BLOCK_D='))
FINAL = {"kept", "reverted", "vetoed", "error"}


@pytest.fixture
def short_timeouts(settings):
    """This process's view of liveness matches the loop worker's (conftest: 3 s heartbeat timeout)."""
    settings.ARK_HEARTBEAT_TIMEOUT_S = 3


@pytest.fixture
def sweep_run(alice, gpu_hardware, short_timeouts):
    def start(budget):
        target_sync()
        thesis = Thesis.objects.create(title="Fused add + RMSNorm", body="One pass over the data.", owner=alice,
                                       target_id=__import__("loop.models").models.Target.objects.get(
                                           name="add_rmsnorm").pk, hardware=gpu_hardware)
        return run_start(actor=alice, thesis=thesis, proposer="sweep", budget_candidates=budget,
                         proposer_settings={"seed_source": BUGGY_SEED})

    return start


def start_gpu_worker(start_process, gpu_hardware, name):
    proc = start_process([*GPU_WORKER_CMD, "-A", "gpu_worker.celery_app", "worker",
                          "-Q", f"gpu.{gpu_hardware}", "--pool=solo", "--without-heartbeat", "--without-gossip",
                          "--without-mingle", "-n", f"{name}-{gpu_hardware}@%h", "--loglevel=INFO"],
                         name=name, ARK_HARDWARE=gpu_hardware, ARK_HEARTBEAT_INTERVAL_S="1")
    proc.wait_for_output("ready.")
    return proc


def test_the_buggy_seed_is_what_the_test_thinks():
    assert BUGGY_SEED.count("SKIP_WEIGHT") == 6


def test_a_sweep_run_proposes_verifies_and_reverts_end_to_end(loop_worker_short_leases, gpu_worker, sweep_run):
    run = sweep_run(budget=3)
    finished = wait_until(lambda: Run.objects.filter(pk=run.pk, status="finished").first(), timeout_s=180,
                          interval_s=0.5)
    # the SPACE has two configurations: both tried once, then the sweep has nothing left
    assert finished.stop_reason == "the proposer has nothing left to try"
    assert "timings need a GPU worker" in finished.notice
    candidates = list(finished.candidates.order_by("number"))
    assert [c.params for c in candidates] == [{"ROWS": 1, "num_warps": 4, "SKIP_WEIGHT": 0},  # the seed first
                                              {"ROWS": 1, "num_warps": 4, "SKIP_WEIGHT": 1}]
    assert {c.status for c in candidates} == {"reverted"}
    for c in candidates:
        # a wrong kernel is incorrect; a right one is verified but, on a CPU, never timed nor kept
        expected = "incorrect" if c.params["SKIP_WEIGHT"] else "unmeasured"
        assert c.reason_code == expected, (c.params, c.reason_text)
        (evaluation,) = c.evaluations.all()
        assert (evaluation.attempt, c.attempt) == (1, 1)
        assert evaluation.report["schema"] == "ark.report/2" and evaluation.report["mode"] == "cpu"
        assert evaluation.geomean_speedup is None
        assert [d.verdict for d in c.decisions.all()] == ["revert"]
        types = list(Event.objects.filter(subject_type="candidate", subject_id=str(c.pk)).values_list("type", flat=True))
        assert types[:2] == ["candidate.proposed", "candidate.queued"]
        assert "candidate.stage" in types and types[-2:] == ["candidate.reported", "candidate.reverted"]
    assert [c.reason_code for c in candidates] == ["unmeasured", "incorrect"]
    assert finished.incumbent is None
    assert Event.objects.filter(run_id=run.pk, type="run.finished").count() == 1
    assert not OutboxMessage.objects.filter(sent__isnull=True).exists()
    assert verify_chain() == []


def test_killing_the_gpu_worker_mid_evaluation_loses_no_candidate_and_counts_none_twice(
        loop_worker_short_leases, gpu_worker, gpu_hardware, start_process, sweep_run):
    run = sweep_run(budget=2)
    victim = wait_until(lambda: Candidate.objects.filter(run=run, status="running").first(), timeout_s=90)
    gpu_worker.kill(9)
    start_gpu_worker(start_process, gpu_hardware, "gpu-restarted")

    def all_final():
        reap()
        run_now = Run.objects.get(pk=run.pk)
        return run_now if run_now.status == "finished" else None

    finished = wait_until(all_final, timeout_s=240, interval_s=1.0)
    candidates = list(finished.candidates.order_by("number"))
    assert len(candidates) == 2 and all(c.status in FINAL for c in candidates)
    victim.refresh_from_db()
    assert victim.attempt == 2
    assert list(victim.evaluations.values_list("attempt", flat=True)) == [2]
    assert Event.objects.filter(type="candidate.requeued", subject_id=str(victim.pk)).count() == 1
    assert Evaluation.objects.filter(candidate__run=run).count() == 2
    total = sum(Evaluation.objects.filter(candidate__run=run).values_list("gpu_seconds", flat=True))
    assert finished.gpu_seconds_used == pytest.approx(total)
    assert verify_chain() == []
