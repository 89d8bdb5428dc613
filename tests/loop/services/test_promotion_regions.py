"""Promoting a candidate's winning boxes: routes over rows x n_ctx with their evidence, onto whatever
serves now; a promote decided against a superseded version is told it is already done or refused, and
two concurrent promotes make one version (run on PostgreSQL too: DATABASE_URL=postgres://...)."""

import threading

import pytest
from django.core.exceptions import ValidationError
from django.db import connection

from loop.models import ServingConfig
from loop.regions import analyze_candidate_grid
from loop.services.deployments import AlreadyDone, deployment_promote, deployment_rollback, export_path
from tests.loop.services.test_deployments import BEST, SEED, dispatcher_for, erin, kept  # noqa: F401 (erin: a fixture)
from tests.loop.test_regions import small_rows_report


@pytest.fixture(autouse=True)
def export_dir(settings, tmp_path):
    settings.SERVING_EXPORT_DIR = tmp_path / "serving"


def small_rows_candidate(run, source=BEST, author=None):
    return kept(run, source, author=author, the_report=small_rows_report())


def test_the_winning_box_is_promoted_with_its_evidence_and_dispatch_serves_only_inside_it(
        make_run, live_worker, bob, dana, django_capture_on_commit_callbacks):
    live_worker()
    candidate = small_rows_candidate(make_run(), author=bob)
    assert candidate.reason_code == "region"
    grid = analyze_candidate_grid(candidate)
    evidence = {"candidate": candidate.pk, "cells": [c.row for c in grid.won]}
    with django_capture_on_commit_callbacks(execute=True):
        config = deployment_promote(actor=dana, candidate=candidate, routes=list(grid.routes), based_on=0,
                                    evidence=evidence)
    assert config.document["axes"] == ["rows", "n_ctx"] and "axis" not in config.document
    (route,) = config.routes
    assert route["bounds"] == {"rows": [1, 5], "n_ctx": [4096, 131073]} and route["evidence"] == evidence
    dispatcher = dispatcher_for(export_path("dsa_topk", "h200"))
    assert dispatcher.kernel_for_shape({"rows": 4, "n_ctx": 32768}).name == f"c{candidate.pk}"
    assert dispatcher.kernel_for_shape({"rows": 64, "n_ctx": 32768}).name == "default"
    assert dispatcher.explain({"rows": 2, "n_ctx": 8192})["evidence"] == evidence


def test_a_box_promoted_over_a_one_axis_config_keeps_what_served_outside_it(make_run, live_worker, bob, dana):
    live_worker()
    run = make_run()
    first = kept(run, SEED, author=bob)
    deployment_promote(actor=dana, candidate=first, routes=[(0, 65536)])
    second = small_rows_candidate(run, author=bob)
    config = deployment_promote(actor=dana, candidate=second, routes=list(analyze_candidate_grid(second).routes))
    owners = {(r["bounds"]["rows"][0], r["bounds"]["n_ctx"][0], r["kernel"]["candidate_id"]) for r in config.routes}
    # the first candidate keeps rows >= 5 below 64K and the rows-1..4 contexts the box does not reach
    assert (1, 4096, f"c{second.pk}") in owners and (5, 0, f"c{first.pk}") in owners and (1, 0, f"c{first.pk}") in owners
    from gpu_worker.serving_config import parse_serving_config
    table = parse_serving_config(config.document)
    serving = lambda rows, n: (lambda r: r.kernel.candidate_id if r else "default")(table.route_for({"rows": rows, "n_ctx": n})[1])
    assert serving(4, 32768) == f"c{second.pk}" and serving(64, 32768) == f"c{first.pk}"
    assert serving(4, 2048) == f"c{first.pk}" and serving(4, 200000) == "default"


def test_a_promote_decided_against_a_superseded_version_is_already_done_or_refused(make_run, live_worker, bob, dana,
                                                                                  erin):  # noqa: F811 (the fixture)
    live_worker()
    run = make_run()
    candidate = small_rows_candidate(run, author=bob)
    routes = list(analyze_candidate_grid(candidate).routes)
    v1 = deployment_promote(actor=dana, candidate=candidate, routes=routes, based_on=0)
    with pytest.raises(AlreadyDone, match="Already done: v1"):
        deployment_promote(actor=erin, candidate=candidate, routes=routes, based_on=0)
    other = kept(run, SEED, author=bob)
    with pytest.raises(ValidationError, match="changed since you looked: v1 is in force now"):
        deployment_promote(actor=erin, candidate=other, routes=[(0, None)], based_on=0)
    # re-promoting the same routes on purpose (decided against v1) makes a version that changes nothing
    v2 = deployment_promote(actor=erin, candidate=candidate, routes=routes, based_on=1)
    assert v2.version == 2 and v2.routes == v1.routes
    v3 = deployment_rollback(actor=dana, target=v2.target, hardware="h200", to_version=1, based_on=2)
    with pytest.raises(AlreadyDone, match="rolled back to v1"):
        deployment_rollback(actor=erin, target=v2.target, hardware="h200", to_version=1, based_on=2)
    assert ServingConfig.objects.count() == 3 and v3.rolled_back_to == 1


def test_two_concurrent_promotes_make_one_version_and_the_second_is_told(
        transactional_db, make_run, live_worker, bob, dana, erin):  # noqa: F811 (the fixture imported above)
    live_worker()
    candidate = small_rows_candidate(make_run(), author=bob)
    routes = list(analyze_candidate_grid(candidate).routes)
    start, results = threading.Barrier(2, timeout=60), {}

    def promote(actor):
        try:
            start.wait()
            results[actor.username] = deployment_promote(actor=actor, candidate=candidate, routes=routes, based_on=0)
        except Exception as error:  # noqa: BLE001 - the test reads what each request was told
            results[actor.username] = error
        finally:
            connection.close()

    threads = [threading.Thread(target=promote, args=(who,)) for who in (dana, erin)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert ServingConfig.objects.count() == 1
    made = [r for r in results.values() if isinstance(r, ServingConfig)]
    told = [r for r in results.values() if not isinstance(r, ServingConfig)]
    assert len(made) == 1 and len(told) == 1 and isinstance(told[0], AlreadyDone), results
    assert "Already done: v1" in told[0].messages[0]
