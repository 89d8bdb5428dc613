"""Promotion and rollback: new immutable serving-config versions, exported as JSON that
gpu_worker.dispatch loads, promoted only by a deployer who is not the candidate's author."""

import json
from pathlib import Path

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from loop.models import Candidate, Event, ServingConfig
from loop.ranges import analyze
from loop.services.candidates import candidate_submit
from loop.services.deployments import deployment_promote, deployment_rollback, export_path
from loop.services.evaluations import candidate_record_report
from loop.services.runs import run_advance
from tests.conftest import _user
from tests.loop.reports import crossover_report, report

ROOT = Path(__file__).resolve().parents[3]
BEST = (ROOT / "gpu_worker/candidates/dsa_topk/best.py").read_text()
SEED = (ROOT / "gpu_worker/candidates/dsa_topk/seed.py").read_text()


@pytest.fixture(autouse=True)
def export_dir(settings, tmp_path):
    settings.SERVING_EXPORT_DIR = tmp_path / "serving"
    return settings.SERVING_EXPORT_DIR


@pytest.fixture
def erin(django_user_model):
    """A reviewer who also deploys."""
    return _user(django_user_model, "erin", ["reviewer", "deployer"])


def kept(run, source, *, author=None, proposer="human", the_report=None):
    candidate = candidate_submit(run=run, source=source, proposer=proposer, author=author)
    run_advance(run_id=run.pk)
    candidate.refresh_from_db()
    candidate_record_report(candidate_id=candidate.pk, attempt=candidate.attempt, worker="gpu-1",
                            report=the_report or crossover_report())
    candidate.refresh_from_db()
    assert candidate.status == "kept", candidate.reason_text
    return candidate


def dispatcher_for(path):
    from gpu_worker.dispatch import Dispatcher

    dispatcher = Dispatcher("dsa_topk")
    dispatcher.load(Path(path).read_text())
    return dispatcher


def test_a_crossover_candidate_is_promoted_for_its_winning_range_alone(
        make_run, live_worker, bob, dana, export_dir, django_capture_on_commit_callbacks):
    live_worker()
    run = make_run()
    candidate = kept(run, BEST, author=bob)
    routes = analyze(candidate.evaluations.get().report, axis="n_ctx").routes
    with django_capture_on_commit_callbacks(execute=True):
        config = deployment_promote(actor=dana, candidate=candidate, routes=routes, note="wins below 64K")
    crossover = routes[0]["hi"]
    assert (config.version, config.axis, config.approver, config.author) == (1, "n_ctx", dana, bob)
    assert [(r["lo"], r["hi"]) for r in config.routes] == [(0, crossover), (crossover, None)]
    assert config.routes[0]["kernel"]["candidate_id"] == f"c{candidate.pk}"
    assert config.routes[1]["kernel"] == "default"
    assert config.document["schema"] == "ark.serving/1" and config.document["fallback"] == "default"
    written = list(config.document)
    config.refresh_from_db()
    assert list(config.document) == written     # as written, on either database (PostgreSQL's jsonb reorders keys)

    exported = export_path("dsa_topk", "h200", 1)
    assert json.loads(exported.read_text()) == config.document
    assert json.loads(export_path("dsa_topk", "h200").read_text()) == config.document
    dispatcher = dispatcher_for(exported)
    assert dispatcher.kernel_for(4096).name == f"c{candidate.pk}"
    assert dispatcher.kernel_for(crossover - 1).name == f"c{candidate.pk}"
    assert dispatcher.kernel_for(crossover).name == "default"
    assert dispatcher.kernel_for(262144).name == "default"
    assert dispatcher.kernel_for(4096).source_hash == candidate.source_hash
    assert Event.objects.filter(type="serving.promoted", subject_id=str(config.pk)).count() == 1


def test_a_second_promotion_keeps_the_first_ones_range_and_rollback_restores_a_version(
        make_run, live_worker, bob, dana, django_capture_on_commit_callbacks):
    live_worker()
    run = make_run()
    first = kept(run, BEST, author=bob)
    deployment_promote(actor=dana, candidate=first, routes=[{"lo": 0, "hi": 65536, "kernel": "candidate"}], note="")
    second = kept(run, SEED, author=bob, the_report=report())
    with django_capture_on_commit_callbacks(execute=True):
        v2 = deployment_promote(actor=dana, candidate=second, routes=[(131072, None)], note="long contexts")
    assert [(r["lo"], r["hi"], r["kernel"] if r["kernel"] == "default" else r["kernel"]["candidate_id"])
            for r in v2.routes] == [(0, 65536, f"c{first.pk}"), (65536, 131072, "default"),
                                    (131072, None, f"c{second.pk}")]
    assert dispatcher_for(export_path("dsa_topk", "h200", 2)).kernel_for(200000).name == f"c{second.pk}"

    with django_capture_on_commit_callbacks(execute=True):
        v3 = deployment_rollback(actor=dana, target=run.thesis.target, hardware="h200", to_version=1, note="regressed")
    v1 = ServingConfig.objects.get(version=1)
    assert (v3.version, v3.rolled_back_to, v3.routes) == (3, 1, v1.routes)
    assert {**v3.document, "version": 1} == v1.document
    current = dispatcher_for(export_path("dsa_topk", "h200"))
    assert (current.version, current.kernel_for(200000).name) == (3, "default")
    with pytest.raises(ValidationError):
        deployment_rollback(actor=dana, target=run.thesis.target, hardware="h200", to_version=3)
    with pytest.raises(ValidationError):
        deployment_rollback(actor=dana, target=run.thesis.target, hardware="h200", to_version=9)


def test_only_a_deployer_promotes_or_rolls_back(make_run, live_worker, bob, charlie, alice):
    live_worker()
    run = make_run()
    candidate = kept(run, BEST, author=bob)
    for actor in (charlie, alice, bob):
        with pytest.raises(PermissionDenied):
            deployment_promote(actor=actor, candidate=candidate, routes=[(0, None)], note="")
        with pytest.raises(PermissionDenied):
            deployment_rollback(actor=actor, target=run.thesis.target, hardware="h200", to_version=1)
    assert not ServingConfig.objects.exists()


def test_the_author_may_not_promote_their_own_candidate(make_run, live_worker, erin):
    live_worker()
    candidate = kept(make_run(), BEST, author=erin)
    with pytest.raises(PermissionDenied, match="author"):
        deployment_promote(actor=erin, candidate=candidate, routes=[(0, None)], note="")


def test_the_runs_creator_may_not_promote_a_candidate_a_person_proposed(make_run, live_worker, erin, bob):
    live_worker()
    run = make_run(actor=erin)
    by_bob = kept(run, BEST, author=bob)
    with pytest.raises(PermissionDenied, match="creator"):
        deployment_promote(actor=erin, candidate=by_bob, routes=[(0, None)], note="")
    by_sweep = kept(run, SEED, proposer="sweep", the_report=report())
    assert deployment_promote(actor=erin, candidate=by_sweep, routes=[(0, None)], note="").version == 1


def test_only_a_kept_candidate_is_promoted_and_routes_must_make_sense(make_run, live_worker, bob, dana):
    live_worker()
    run = make_run()
    candidate = kept(run, BEST, author=bob)
    for bad in ([], [(5, 5)], [(-1, 10)], [(0, 100), (50, 200)], [{"lo": 0, "hi": None, "kernel": "default"}]):
        with pytest.raises(ValidationError):
            deployment_promote(actor=dana, candidate=candidate, routes=bad, note="")
    Candidate.objects.filter(pk=candidate.pk).update(status="reverted")
    with pytest.raises(ValidationError, match="kept"):
        deployment_promote(actor=dana, candidate=candidate, routes=[(0, None)], note="")


def test_analyze_candidate_reads_the_latest_evaluation_or_says_nothing(make_run, live_worker, bob):
    from loop.ranges import analyze_candidate
    from loop.services.candidates import candidate_submit as submit
    from tests.loop.reports import cpu_report

    live_worker()
    run = make_run()
    candidate = kept(run, BEST, author=bob)
    assert analyze_candidate(candidate).win_ranges == ((4096, 32768),)
    untimed = submit(run=run, source=SEED, proposer="human")
    assert analyze_candidate(untimed) is None
    run_advance(run_id=run.pk)
    untimed.refresh_from_db()
    candidate_record_report(candidate_id=untimed.pk, attempt=untimed.attempt, worker="cpu", report=cpu_report())
    assert analyze_candidate(untimed) is None
