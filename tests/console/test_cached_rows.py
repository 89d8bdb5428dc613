"""Rows kept in the per-process fragment cache (docs/scaling.md, What a request costs) never show an old state:
a run page's row is cached under everything it shows (console/views/runs.py, row_key), so a page drawn after a
change shows the change, whether the candidate itself changed or only what it is compared with; an audit row is
cached under its event's id and hash; a row's actions (CSRF token, the viewer's permissions) are never cached."""

import re

import pytest
from django.urls import reverse

from loop.services.decisions import candidate_approve
from loop.services.deployments import deployment_promote
from tests.console import builders

pytestmark = pytest.mark.django_db


def _row(page: bytes, number: int) -> str:
    text = page.decode()
    start = text.index(f'data-testid="candidate-row-{number}"')
    return text[start:text.index("</tr>", start)]


def test_a_run_page_row_follows_its_candidate_through_the_loop(as_bob, alice, bob):
    run = builders.make_run(alice)
    url = reverse("run", args=[run.pk])
    candidate = builders.submit(run, tag="a", author=alice)
    assert 'data-status="proposed"' in _row(as_bob.get(url).content, 1)
    builders.dispatch(candidate)
    assert 'data-status="queued"' in _row(as_bob.get(url).content, 1)
    builders.progress(candidate, "verify")
    row = _row(as_bob.get(url).content, 1)
    assert 'data-status="running"' in row and "verify:started" in row and "(alice)" in row
    assert not re.search(r"\d\.\d\dx", row)  # no speedup yet
    builders.report(candidate, builders.passing_report(speedup=1.25))
    row = _row(as_bob.get(url).content, 1)
    assert 'data-status="awaiting_review"' in row and 'data-testid="approve-1"' in row
    assert re.search(r'<td class="num">\d\.\d\dx <span class="muted">\[', row)  # its speedup and interval
    candidate_approve(candidate=candidate, actor=bob)
    row = _row(as_bob.get(url).content, 1)
    assert 'data-status="kept"' in row and 'title="incumbent"' in row and "approve-1" not in row


def test_a_row_turns_stale_when_only_what_it_was_measured_against_moves_on(as_bob, alice, bob, dana):
    run = builders.make_run(alice)
    kept = builders.evaluated(run, builders.passing_report(crossover_at=None), tag="kept")
    candidate_approve(candidate=kept, actor=bob)
    waiting = builders.evaluated(run, builders.passing_report(speedup=1.4), tag="waiting")
    url = reverse("run", args=[run.pk])
    assert "stale" not in _row(as_bob.get(url).content, waiting.number)
    deployment_promote(actor=dana, candidate=kept, routes=[{"lo": 0, "hi": None, "kernel": "candidate"}])
    row = _row(as_bob.get(url).content, waiting.number)  # the candidate's own row in the database did not change
    assert f'data-testid="stale-{waiting.number}"' in row and "now v1" in row


def test_a_cached_row_keeps_each_viewers_own_actions_and_token(as_bob, as_charlie, alice):
    run = builders.make_run(alice)
    builders.evaluated(run, builders.passing_report())
    url = reverse("run", args=[run.pk])
    as_bob.get(url)  # bob (a reviewer) draws the row first
    assert "approve-1" not in _row(as_charlie.get(url).content, 1)  # charlie may not review
    tokens = {re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', _row(as_bob.get(url).content, 1)).group(1)
              for _ in range(2)}
    assert len(tokens) == 2  # a fresh (masked) token each time: the actions are drawn per request


def test_an_audit_row_is_its_event(as_charlie, alice):
    builders.make_run(alice)
    first = as_charlie.get(reverse("audit")).content.decode()
    builders.make_run(alice)
    second = as_charlie.get(reverse("audit")).content.decode()
    rows = re.findall(r"<tr><td>(\d+)</td>.*?</tr>", second, re.DOTALL)
    assert len(rows) > len(re.findall(r"<tr><td>(\d+)</td>.*?</tr>", first, re.DOTALL))
    for seq in re.findall(r"<tr><td>(\d+)</td>", first):  # every row drawn before is drawn the same again
        old = re.search(rf"<tr><td>{seq}</td>.*?</tr>", first, re.DOTALL).group(0)
        assert old in second
