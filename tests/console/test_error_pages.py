"""Error pages in the console's own look: each says in words what happened and where to go, and none shows
an internal name (a permission code, an exception class) or Django's debug page."""

import gzip
from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.test import Client

pytestmark = pytest.mark.django_db

INTERNAL = ("loop.", "lacks", "Traceback", "PermissionDenied", "Http404")


def _words(response) -> str:
    text = response.content.decode()
    assert 'data-testid="error-page"' in text, text[:500]
    for name in INTERNAL:
        assert name not in text, name
    return text


def test_404_names_the_address_and_offers_a_way_back(as_charlie):
    response = as_charlie.get("/no/such/page/")
    assert response.status_code == 404
    text = _words(response)
    assert "There is no page at /no/such/page/" in text and 'href="/theses/"' in text


SKILL = ("---\ntitle: t\nkind: hardware\napplies_to: {hardware: [h200], models: [any], targets: [any]}\n"
         "sources: [\"s\"]\n---\n\nbody\n")


def test_403_says_which_role_is_needed_in_words(as_charlie, alice):
    response = as_charlie.post("/skills/new/", {"key": "hardware/x.md", "text": SKILL, "note": ""})
    assert response.status_code == 403
    text = _words(response)
    assert "needs the reviewer role" in text and "Your roles: viewer" in text and "Users page" in text


def test_405_is_a_page_that_says_to_use_the_button(as_alice):
    response = as_alice.get("/skills/export/")
    assert response.status_code == 405 and response["Allow"] == "POST"
    text = _words(response)
    assert "takes POST requests, not GET" in text


def test_an_expired_form_is_a_403_that_says_nothing_changed(alice):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    response = client.post("/theses/new/", {"title": "x"})
    assert response.status_code == 403
    assert "Nothing was changed" in _words(response)


def test_500_page_renders_without_the_request(rf):
    from console.views.errors import server_error

    response = server_error(rf.get("/"))
    assert response.status_code == 500
    assert "Something went wrong" in _words(response)


def test_plotly_bundle_is_served_compressed(tmp_path, settings):
    """collectstatic (as scripts/run does) writes plotly.min.js.gz; WhiteNoise sends it to a client that
    accepts gzip, and the plain file to one that does not."""
    settings.STATIC_ROOT = tmp_path / "static"
    settings.STATICFILES_DIRS = [d for d in settings.STATICFILES_DIRS if isinstance(d, tuple)]  # plotly only
    settings.WHITENOISE_USE_FINDERS = False
    call_command("collectstatic", "--noinput", verbosity=0)
    original = Path(finders.find("plotly/plotly.min.js")).read_bytes()
    zipped = Client().get("/static/plotly/plotly.min.js", HTTP_ACCEPT_ENCODING="gzip, deflate")
    assert zipped.status_code == 200 and zipped["Content-Encoding"] == "gzip"
    body = b"".join(zipped.streaming_content)
    assert len(body) < len(original) / 2 and gzip.decompress(body) == original
    plain = Client().get("/static/plotly/plotly.min.js")
    assert plain.status_code == 200 and "Content-Encoding" not in plain
    assert b"".join(plain.streaming_content) == original
