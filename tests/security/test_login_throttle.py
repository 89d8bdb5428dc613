"""Issue 26, attack 2: the lockout was bypassed with look-alike usernames (a full-width letter logged in with
the right password, each look-alike with its own counter), and the promote password re-entry answered 30 wrong
tries. django-axes now counts failures per (NFKC-casefolded username, address); logins and failures are
audit events."""

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.test import Client
from django.urls import reverse

from loop.models import Event

pytestmark = pytest.mark.django_db


@pytest.fixture
def tight_limit(settings):
    settings.AXES_FAILURE_LIMIT = 3


def _login(client, password, username="charlie", address="10.1.2.3"):
    return client.post(reverse("login"), {"username": username, "password": password}, REMOTE_ADDR=address)


def test_after_too_many_failures_even_the_right_password_is_refused_until_the_window_ends(
        tight_limit, client, charlie):
    for _ in range(2):
        assert _login(client, "wrong").status_code == 200
    assert _login(client, "wrong").status_code == 429  # the third failure locks
    refused = _login(client, "charlie-password-1")
    assert refused.status_code == 429 and b"Too many failed logins" in refused.content
    assert "_auth_user_id" not in client.session
    assert _login(Client(), "charlie-password-1", address="10.9.9.9").status_code == 302  # another address
    # The window's end: the failures are moved back past the cool-off instead of sleeping through it.
    AccessAttempt.objects.update(attempt_time=AccessAttempt.objects.get().attempt_time - timedelta(hours=1))
    assert _login(client, "charlie-password-1").status_code == 302
    assert client.session["_auth_user_id"] == str(charlie.pk)


def test_a_success_resets_the_failure_count(tight_limit, client, charlie):
    for _ in range(2):
        _login(client, "wrong")
    assert _login(client, "charlie-password-1").status_code == 302
    for _ in range(2):
        assert _login(Client(), "wrong").status_code == 200
    assert _login(Client(), "charlie-password-1").status_code == 302


def test_look_alike_usernames_share_one_counter(tight_limit, client, charlie):
    """As the red team did it: the failures spread over look-alikes, then the right password as one."""
    for name in ("charlie", "ｃharlie"):  # the second starts with a full-width c
        assert _login(Client(), "wrong", username=name).status_code == 200
    assert _login(Client(), "wrong", username="CHARLIE").status_code == 429  # the third failure locks
    for name in ("ｃharlie", "charlie", "Charlie", "ｃｈａｒｌｉｅ"):
        response = _login(Client(), "charlie-password-1", username=name)
        assert response.status_code == 429 and b"Too many failed logins" in response.content, name
    assert AccessAttempt.objects.get().username == "charlie"


def test_logins_and_failed_logins_are_audit_events(client, charlie):
    _login(client, "wrong", username="ｃharlie")
    _login(client, "charlie-password-1")
    failed = Event.objects.get(type="auth.login_failed")
    assert (failed.actor, failed.payload) == ("charlie", {"username": "charlie", "address": "10.1.2.3"})
    login = Event.objects.get(type="auth.login")
    assert (login.actor, login.payload["address"]) == ("charlie", "10.1.2.3")


def test_the_promote_password_re_entry_is_throttled(tight_limit, world, dana):
    """30 wrong passwords on promote were each answered; now the third failure locks and nothing is checked."""
    client = Client(REMOTE_ADDR="10.4.4.4")
    client.force_login(dana)
    url = reverse("candidate_promote", args=[world["candidate"].pk])
    body = {"routes": "0 100000 candidate\n100000 inf default", "note": ""}
    answers = [client.post(url, {**body, "password": f"guess-{i}"}).status_code for i in range(6)]
    assert answers[:2] == [400, 400] and set(answers[2:]) == {429}
    refused = client.post(url, {**body, "password": "dana-password-1"})
    assert refused.status_code == 429 and b"Too many failed logins" in refused.content
    assert Event.objects.filter(type="auth.login_failed", actor="dana").count() >= 3
    assert not Event.objects.filter(type="serving.promoted").exclude(actor="dana").exists()
