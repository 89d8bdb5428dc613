"""Issue 26, attacks 3 and 5, replayed over HTTP: unparsed parameters were 500s, any viewer could ping any
queue name (2 MB of it), and a run's hardware built the serving export's file path."""

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from loop.models import Event, OutboxMessage, Ping, Run, Worker

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("held_tasks")]  # no loop worker here


@pytest.mark.parametrize("url", ["audit", "audit_csv"])
@pytest.mark.parametrize("query, field", [("run=²", "run"), ("run=-3", "run"), ("page=x", "page"),
                                          ("actor=" + "a" * 5000, "actor")])
def test_audit_parameters_that_do_not_parse_are_a_400_with_a_message(as_charlie, url, query, field):
    response = as_charlie.get(f"{reverse(url)}?{query}")
    assert response.status_code == 400
    page = response.content.decode()
    assert "Those filters cannot be read" in page and f"{field}:" in page


def test_audit_filters_that_parse_still_filter(as_charlie, alice, world):
    run = world["run"]
    page = as_charlie.get(f"{reverse('audit')}?run={run.pk}").content.decode()
    assert f'value="{run.pk}"' in page and "run.started" in page
    csv = as_charlie.get(f"{reverse('audit_csv')}?run={run.pk}")
    assert csv.status_code == 200 and "run.started" in csv.content.decode()
    export = Event.objects.get(type="export.downloaded")
    assert (export.actor, export.payload) == ("charlie", {"what": "audit.csv", "filters": {"run": str(run.pk)}})


def test_a_viewer_cannot_ping(as_charlie):
    response = as_charlie.post(reverse("ping"), {"hardware": "cpu"})
    assert response.status_code == 403
    assert not Ping.objects.exists() and not OutboxMessage.objects.exists()


@pytest.mark.parametrize("hardware", ["x" * 2_000_000, "../../../../x", "gpu.h200", "H200 ", "never-seen"])
def test_a_ping_to_anything_but_a_registered_hardware_slug_is_refused(as_bob, hardware):
    before = Event.objects.count()
    response = as_bob.post(reverse("ping"), {"hardware": hardware})
    assert response.status_code == 400 and b"Ping refused" in response.content
    assert len(response.content) < 2000
    assert not Ping.objects.exists() and not OutboxMessage.objects.exists() and Event.objects.count() == before


def test_a_ping_to_a_registered_kind_goes_out_and_htmx_sees_the_refusal_in_the_table(as_bob):
    from django.utils import timezone

    Worker.objects.create(name="w1", hardware="mi300x", last_heartbeat=timezone.now())
    assert as_bob.post(reverse("ping"), {"hardware": "mi300x"}).status_code == 302
    assert as_bob.post(reverse("ping"), {"hardware": "cpu"}).status_code == 302  # configured (ARK_HARDWARE_KINDS)
    assert sorted(Ping.objects.values_list("hardware", flat=True)) == ["cpu", "mi300x"]
    refused = as_bob.post(reverse("ping"), {"hardware": "../x"}, HTTP_HX_REQUEST="true")
    assert refused.status_code == 200 and b'data-testid="ping-error"' in refused.content


def test_a_thesis_or_run_with_a_path_for_hardware_is_refused(as_alice, alice):
    from tests.console import builders

    target = builders.make_target()
    response = as_alice.post(reverse("thesis_new"), {"title": "t", "body": "b", "target": target.name,
                                                     "hardware": "../../../../x", "priority": 0})
    assert response.status_code == 400 and b"is not a hardware kind" in response.content
    thesis = builders.make_thesis(alice)
    response = as_alice.post(reverse("run_start", args=[thesis.pk]), {
        "proposer": "sweep", "proposer_settings": "{}", "hardware": "../../../../x", "profile": "smoke",
        "budget_candidates": 3, "budget_gpu_minutes": 5, "review_mode": "gate"})
    assert response.status_code == 400 and b"is not a hardware kind" in response.content
    assert not Run.objects.exists()


def test_the_services_refuse_a_path_for_hardware_too(alice):
    from loop.services.runs import run_start
    from tests.console import builders

    with pytest.raises(ValidationError, match="not a hardware kind"):
        run_start(actor=alice, thesis=builders.make_thesis(alice), proposer="sweep", hardware="../../../../x")


def test_the_serving_export_path_stays_inside_its_directory(settings, tmp_path):
    from loop.services.deployments import export_path

    settings.SERVING_EXPORT_DIR = tmp_path / "serving"
    assert export_path("dsa_topk", "h200", 3) == (tmp_path / "serving" / "dsa_topk" / "h200" / "v3.json").resolve()
    for target, hardware in [("dsa_topk", "../../../../x"), ("../../etc", "h200"), ("/etc", "h200")]:
        with pytest.raises(ValueError, match="refused"):
            export_path(target, hardware, 1)


HOSTILE = {"run": "²", "page": "²", "sort": "__class__", "status": "x" * 300, "owner": "²", "target": "../x",
           "hardware": "../../x", "q": "\x00", "type": "{", "actor": "ｖiewer2", "part": "status", "version": "-1"}


def test_no_page_answers_a_hostile_query_with_a_500(world, as_alice):
    """Every named GET route, with every parameter name the console reads set to something hostile."""
    from tests.security.test_web import all_urls

    for name, url in all_urls(world).items():
        if name in ("logout", "skill_download", "audit_csv"):
            continue
        response = as_alice.get(url, HOSTILE)
        assert response.status_code < 500, (name, response.status_code)


def test_a_nul_character_in_a_query_or_a_form_field_is_a_400_and_changes_nothing(as_alice, world):
    """PostgreSQL's text columns cannot hold a NUL: a filter that passed one on was a 500 there (SQLite took it)."""
    from loop.models import Thesis

    listing = as_alice.get(reverse("theses"), {"q": "top\x00k"})
    assert listing.status_code == 400 and "NUL character" in listing.content.decode()
    before = Thesis.objects.count()
    form = {"title": "x\x00", "body": "y", "target": world["thesis"].target.name, "hardware": "h200", "priority": 0}
    created = as_alice.post(reverse("thesis_new"), form)
    assert created.status_code == 400 and Thesis.objects.count() == before
    assert as_alice.get(reverse("theses"), {"q": "top k"}).status_code == 200
