"""The sweep: Optuna over the seed's SPACE, one rewritten file per candidate, rebuilt from the
database on every call, never the same configuration twice."""

import ast
from pathlib import Path

from loop.models import Candidate, Run
from loop.proposers import sweep
from loop.proposers import propose_next
from loop.services.runs import run_advance

ROOT = Path(__file__).resolve().parents[3]
SEED = (ROOT / "gpu_worker/candidates/dsa_topk/seed.py").read_text()
SMALL_SEED = SEED.replace('SPACE = {"BLOCK": [1024, 2048, 4096, 8192], "num_warps": [4, 8, 16]}',
                          'SPACE = {"BLOCK": [1024, 4096], "num_warps": [4, 8]}')


def params_of(source):
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and node.targets[0].id == "PARAMS":
            return ast.literal_eval(node.value)


def test_rewrite_params_changes_only_the_params_literal():
    out = sweep.rewrite_params(SEED, {"BLOCK": 1024, "num_warps": 16})
    assert params_of(out) == {"BLOCK": 1024, "num_warps": 16}
    assert out.replace('PARAMS = {"BLOCK": 1024, "num_warps": 16}', 'PARAMS = {"BLOCK": 4096, "num_warps": 8}') == SEED
    assert sweep.read_space(out)[1] == sweep.read_space(SEED)[1]


def test_rewrite_params_keeps_non_ascii_text_intact():
    source = '# é — ü\nPARAMS = {"A": 1}  # défaut\n\ndef forward():\n    return "ü"\n'
    out = sweep.rewrite_params(source, {"A": 2})
    assert out == source.replace('{"A": 1}', '{"A": 2}')


def test_rewrite_params_adds_params_after_the_imports_when_absent():
    out = sweep.rewrite_params("import torch\n\ndef forward():\n    pass\n", {"A": 2})
    assert params_of(out) == {"A": 2} and out.startswith("import torch\n")


def sweep_run(make_run, seed=SMALL_SEED, **kw):
    return make_run(proposer="sweep", proposer_settings={"seed_source": seed}, **kw)


def test_it_proposes_the_seed_first_then_every_configuration_once_then_finishes(make_run, live_worker):
    live_worker()
    run = sweep_run(make_run, budget_candidates=10)
    seen = []
    for _ in range(4):
        candidate = sweep.propose(Run.objects.get(pk=run.pk))
        assert candidate is not None
        Candidate.objects.filter(pk=candidate.pk).update(status="reverted", reason_code="unmeasured")
        seen.append(tuple(sorted(candidate.params.items())))
        assert params_of(candidate.source) == candidate.params
    assert seen[0] == (("BLOCK", 4096), ("num_warps", 8))
    assert len(set(seen)) == 4
    assert sweep.propose(Run.objects.get(pk=run.pk)) is None
    run.refresh_from_db()
    assert run.proposer_settings["exhausted"] == "every configuration of the SPACE was tried"
    run_advance(run_id=run.pk)
    run.refresh_from_db()
    assert (run.status, run.stop_reason) == ("finished", "the proposer has nothing left to try")


def test_a_restarted_loop_rebuilds_the_study_and_skips_what_is_in_flight(make_run, live_worker):
    live_worker()
    run = sweep_run(make_run, seed=SEED)
    first = sweep.propose(run)
    second = sweep.propose(Run.objects.get(pk=run.pk))  # the first is still proposed: not offered again
    assert first.params != second.params
    # a fresh process: nothing but the database
    used = {tuple(sorted(c.params.items())) for c in Candidate.objects.filter(run=run)}
    third = sweep.propose(Run.objects.get(pk=run.pk))
    assert tuple(sorted(third.params.items())) not in used


def test_results_feed_the_study(make_run, live_worker):
    from loop.models import Evaluation

    run = sweep_run(make_run, seed=SEED)
    first = sweep.propose(run)
    Candidate.objects.filter(pk=first.pk).update(status="kept")
    Evaluation.objects.create(candidate=first, attempt=1, report={}, geomean_speedup=1.25)
    study, tried = sweep.rebuild_study(Run.objects.get(pk=run.pk), *reversed(sweep.read_space(SEED)))
    assert [t.value for t in study.trials] == [0.8]
    assert len(tried) == 1


def test_propose_next_waits_for_a_free_worker_and_then_proposes_one(make_run, live_worker):
    run = sweep_run(make_run)
    assert propose_next(run_id=run.pk) is None  # no live worker
    live_worker()
    assert propose_next(run_id=run.pk) is not None
    assert propose_next(run_id=run.pk) is None  # one waits already
    assert run.candidates.count() == 1


def test_a_seed_without_space_exhausts_the_sweep(make_run):
    run = sweep_run(make_run, seed=SEED.replace("SPACE =", "_NOT_SPACE ="))
    assert sweep.propose(run) is None
    assert "no SPACE" in Run.objects.get(pk=run.pk).proposer_settings["exhausted"]
