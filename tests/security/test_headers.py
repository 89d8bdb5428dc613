"""Issue 26, attack 6 (HTTP side): no Content-Security-Policy, and static responses without nosniff. The policy
itself is exercised in the browser: tests/browser/conftest.py fails any test whose pages Chromium reports a
violation on. (The websocket's exact Origin match is in test_web.py.)"""

import pytest
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db


def directives(response) -> dict:
    header = response["Content-Security-Policy"]
    return {part.split()[0]: part.split()[1:] for part in (p.strip() for p in header.split(";")) if part}


def test_every_page_carries_a_policy_that_allows_no_inline_or_foreign_script(as_charlie, client):
    for response in (client.get(reverse("login")), as_charlie.get(reverse("dashboard")),
                     as_charlie.get(reverse("audit"))):
        policy = directives(response)
        assert policy["script-src"] == ["'self'"] and policy["default-src"] == ["'self'"]
        assert policy["object-src"] == ["'none'"] and policy["frame-ancestors"] == ["'none'"]
        assert "'unsafe-eval'" not in response["Content-Security-Policy"]
        assert response["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize("path", ["/static/plotly/plotly.min.js", "/static/ark/live.js"])
def test_static_files_are_served_with_nosniff(path):
    response = Client().get(path)
    assert response.status_code == 200
    assert response["X-Content-Type-Options"] == "nosniff"
