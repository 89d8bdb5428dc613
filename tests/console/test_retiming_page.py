"""The candidate page's re-timing panel and its "Re-time now" action (docs/keep-rule.md, What blocks a
promotion): a GPU-timed kept candidate is refused promotion until a re-timing confirms it."""

import pytest
from django.urls import reverse

from gpu_worker.queues import Task
from loop.models import OutboxMessage, ServingConfig
from loop.services.decisions import candidate_approve
from loop.tasks import retimed
from tests.console import builders
from tests.loop.services.test_confirmations import measured

pytestmark = [pytest.mark.django_db, pytest.mark.retiming]


@pytest.fixture
def parent(alice):
    """A kept candidate with a GPU report (tests/console/builders.py)."""
    candidate = builders.evaluated(builders.make_run(alice), builders.passing_report(), tag="parent")
    candidate_approve(candidate=candidate, actor=alice)
    candidate.refresh_from_db()
    return candidate


def panel(client, candidate) -> str:
    page = client.get(reverse("candidate", args=[candidate.pk])).content.decode()
    start = page.index('data-testid="retiming"')
    return page[start:page.index("</section>", start)]


def regions_promote(client, candidate, **kw):
    """A promotion of the candidate's winning regions (a dsa_topk candidate is promoted on its regions page)."""
    body = {"based_on": 0, "note": "wins below 100K", "password": "dana-password-1"}
    return client.post(reverse("candidate_regions_promote", args=[candidate.pk]), body, **kw)


def test_promote_is_refused_until_re_time_now_confirms(as_dana, parent):
    assert "Not re-timed yet" in panel(as_dana, parent) and 'data-testid="retime-now"' in panel(as_dana, parent)
    refused = regions_promote(as_dana, parent, follow=True)
    assert refused.status_code == 400 and not ServingConfig.objects.exists()
    assert "bench:unconfirmed: no independent re-timing" in refused.content.decode()
    assert "Re-time now" in refused.content.decode()

    queued = as_dana.post(reverse("candidate_retime", args=[parent.pk]))
    assert queued.status_code == 302
    spec = OutboxMessage.objects.get(task=Task.GPU_RETIME).args[0]
    text = panel(as_dana, parent)
    assert "Re-timing queued (no h200 worker is alive now: it runs when one starts)" in text
    assert 'data-testid="retime-now"' not in text

    retimed(spec["confirmation_id"], "h200-b", measured(parent.evaluations.get().report))
    assert "Confirmed by an independent re-timing on h200-b: ratio" in panel(as_dana, parent)
    regions_promote(as_dana, parent)
    assert ServingConfig.objects.get().version == 1


def test_re_time_now_needs_the_promote_permission(as_charlie, parent):
    assert 'data-testid="retime-now"' not in panel(as_charlie, parent)
    response = as_charlie.post(reverse("candidate_retime", args=[parent.pk]))
    assert response.status_code == 403 and not OutboxMessage.objects.filter(task=Task.GPU_RETIME).exists()
