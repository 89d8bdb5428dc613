import csv
import io

import pytest
from django.urls import reverse

from loop.services.decisions import candidate_veto
from loop.services.theses import thesis_create
from tests.console import builders

pytestmark = pytest.mark.django_db


@pytest.fixture
def history(alice, bob):
    run = builders.make_run(alice)
    builders.evaluated(run, builders.guard_report(), tag="g")
    vetoed = builders.evaluated(run, builders.passing_report(), tag="v")
    candidate_veto(candidate=vetoed, actor=bob, reason="=HYPERLINK(\"http://x\") reads out of bounds")
    thesis_create(actor=bob, title="Other", body="b", target=run.thesis.target, hardware="h200")
    return run


def test_the_audit_page_filters_by_event_run_reason_and_person(as_charlie, history):
    def rows(**query):
        return [e.type for e in as_charlie.get(reverse("audit"), query).context["page"]]

    assert "candidate.vetoed" in rows() and "thesis.created" in rows()
    assert rows(actor="bob") == ["thesis.created", "candidate.vetoed"]
    assert set(rows(run=str(history.pk))) >= {"candidate.reverted", "candidate.vetoed", "run.started"}
    assert "thesis.created" not in rows(run=str(history.pk))
    assert rows(reason="guard:side_stream") == ["candidate.reverted"]
    assert rows(type="candidate.reverted") == ["candidate.reverted"]
    assert rows(verdict="revert") == ["candidate.reverted"]


def test_the_filter_offers_every_event_type_and_person_of_the_log_in_order(as_charlie, history):
    """The choices step through the log's indexes (loop.selectors._distinct_values) instead of reading the
    whole log: they must still be exactly the log's distinct values, sorted as the database sorts them."""
    from loop.models import Event

    choices = as_charlie.get(reverse("audit")).context["choices"]
    for column, key in (("type", "types"), ("actor", "actors")):
        expected = list(Event.objects.order_by(column).values_list(column, flat=True).distinct())
        assert len(expected) >= 2 and choices[key] == expected


def test_the_csv_export_follows_the_filter_and_defuses_formulas(as_charlie, history):
    response = as_charlie.get(reverse("audit_csv"), {"actor": "bob"})
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0][:4] == ["seq", "created", "type", "actor"]
    assert [r[2] for r in rows[1:]] == ["candidate.vetoed", "thesis.created"]
    assert all(not cell.startswith("=") for row in rows for cell in row)
