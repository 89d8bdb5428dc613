"""loop/services/evaluations.py: what of a report is stored, and the GPU time it adds to its run."""

import math

import pytest

from loop.models import Candidate, Evaluation, Run
from loop.services.evaluations import candidate_record_report, json_safe
from loop.services.runs import run_advance
from tests.loop.reports import report
from tests.loop.services.test_report_recording import submit


def test_json_safe_turns_what_jsonb_refuses_into_storable_values():
    stored = json_safe({"a": math.nan, 3: [math.inf, -math.inf, 1.5], "ok": (True, None, "x"), "obj": object()})
    assert stored["a"] is None and stored["3"] == [None, None, 1.5]
    assert stored["ok"] == [True, None, "x"]
    assert stored["obj"].startswith("<object object")


def test_json_safe_bounds_the_nesting_of_a_hostile_report():
    deep = current = {}
    for _ in range(200):
        current["next"] = {}
        current = current["next"]
    stored, depth = json_safe(deep), 0
    while isinstance(stored, dict):
        stored, depth = stored.get("next"), depth + 1
    assert depth == 65  # levels 0..64 kept, the 65th cut to None


def dispatched(make_run, live_worker):
    live_worker()
    run = make_run()
    (candidate,) = submit(run)
    run_advance(run_id=run.pk)
    candidate.refresh_from_db()
    assert candidate.status in (Candidate.Status.QUEUED, Candidate.Status.RUNNING), candidate.status
    return run, candidate


@pytest.mark.django_db
def test_the_reports_gpu_time_the_sum_of_its_stages_is_added_to_its_run(make_run, live_worker):
    run, candidate = dispatched(make_run, live_worker)
    body = report(candidate_id=candidate.pk, attempt=candidate.attempt, seconds=42.5)
    evaluation = candidate_record_report(candidate_id=candidate.pk, attempt=candidate.attempt, worker="w1",
                                         report=body)
    stages = 0.1 + 5.0 + 42.5 + 10.0  # guard, verify, benchmark, e2e as tests/loop/reports.py writes them
    assert evaluation.gpu_seconds == pytest.approx(stages)
    run.refresh_from_db()
    assert run.gpu_seconds_used == pytest.approx(stages)
    # stored through the contract: every declared fingerprint field, None where the worker sent none
    def measured(fingerprint):
        return {k: v for k, v in fingerprint.items() if v is not None}

    assert measured(evaluation.hardware_fingerprint) == measured(body["hardware"]) and evaluation.worker == "w1"
    assert measured(body["hardware"])  # the test's report does carry a fingerprint


@pytest.mark.django_db
def test_a_report_that_is_not_an_object_is_kept_for_reading_and_counts_no_time(make_run, live_worker):
    run, candidate = dispatched(make_run, live_worker)
    evaluation = candidate_record_report(candidate_id=candidate.pk, attempt=candidate.attempt, worker="w1",
                                         report=["not", "a", "report"])
    assert evaluation.report == {"unparsed": "['not', 'a', 'report']"} and evaluation.gpu_seconds == 0
    run.refresh_from_db()
    assert run.gpu_seconds_used == 0 and Evaluation.objects.filter(candidate=candidate).count() == 1


@pytest.mark.django_db
def test_a_report_for_a_candidate_that_does_not_exist_is_ignored(make_run, live_worker):
    assert candidate_record_report(candidate_id=999_999, attempt=1, worker="w1", report={}) is None
    assert not Evaluation.objects.exists() and not Run.objects.filter(gpu_seconds_used__gt=0).exists()
