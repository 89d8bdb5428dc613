"""The demo scripts/run loads: recorded H200 reports as finished runs plus a gate-mode run whose candidates
await review; labelled with the GPU and day they were recorded on; loading twice adds nothing."""

import pytest
from django.core.management import call_command

from loop.models import Candidate, Event, Run, ServingConfig
from loop.services.decisions import candidate_approve, candidate_veto
from loop.services.deployments import deployment_promote, deployment_rollback
from loop.services.targets import target_sync

pytestmark = pytest.mark.django_db  # on_commit publishes do not fire: no task reaches a broker


@pytest.fixture
def admin(django_user_model):
    return django_user_model.objects.create_superuser("admin", password="admin-password-1")


def _load(capsys) -> str:
    call_command("demo_load")
    return capsys.readouterr().out


def test_the_demo_loads_once_with_candidates_awaiting_review(admin, capsys):
    target_sync()
    out = _load(capsys)
    gate = Run.objects.get(proposer_settings__demo=True)
    assert gate.review_mode == "gate" and gate.hardware == "h200"
    assert "recorded on NVIDIA H200, 2026-12-04" in gate.notice and "nothing in this run is live" in gate.notice
    waiting = list(gate.candidates.filter(status=Candidate.Status.AWAITING_REVIEW).order_by("number"))
    assert len(waiting) == 2 and all(c.source for c in waiting) and waiting[1].parent_id == waiting[0].pk
    imported = Run.objects.exclude(pk=gate.pk)
    assert imported.count() == 3 and set(imported.values_list("imported_date", flat=True)) == {"2026-12-04"}
    assert f"run {gate.pk}" in out and "2 candidates awaiting review" in out
    counts = (Run.objects.count(), Candidate.objects.count(), Event.objects.count())
    assert "already loaded" in _load(capsys)
    assert (Run.objects.count(), Candidate.objects.count(), Event.objects.count()) == counts


def test_the_demo_walk_approve_veto_promote_rollback(admin, capsys):
    target_sync()
    _load(capsys)
    seed, best = Run.objects.get(proposer_settings__demo=True).candidates.order_by("number")
    candidate_veto(candidate=seed, actor=admin, reason="the best supersedes it")
    candidate_approve(candidate=best, actor=admin, note="walked the demo")
    best.refresh_from_db()
    assert best.status == Candidate.Status.KEPT
    first = deployment_promote(actor=admin, candidate=best, routes=[(0, 64)])
    second = deployment_promote(actor=admin, candidate=best, routes=[(64, None)])
    back = deployment_rollback(actor=admin, target=best.run.thesis.target, hardware="h200", to_version=first.version)
    assert (first.version, second.version, back.version) == (1, 2, 3) and back.routes == first.routes
    assert ServingConfig.objects.count() == 3
    types = list(Event.objects.values_list("type", flat=True))
    assert {"candidate.vetoed", "candidate.approved", "serving.promoted", "serving.rolled_back"} <= set(types)
