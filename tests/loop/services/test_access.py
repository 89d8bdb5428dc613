"""Access records: logins on any login page and failed logins are audit events counted under one normalised
name; an export is recorded with what left and by whom, and only if its transaction commits."""

import pytest
from django.contrib.auth.signals import user_login_failed
from django.db import transaction
from django.test import Client

from loop.models import Event
from loop.services.access import export_record, username_normalised

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("given, counted", [
    ("  ＣＨＡＲＬＩＥ  ", "charlie"),  # full-width letters and surrounding blanks
    ("Straße", "strasse"),  # casefolded, not only lower-cased
    ("ﬁona", "fiona"),  # a ligature is two letters
    (None, ""),
])
def test_a_username_is_counted_under_its_nfkc_casefolded_form(given, counted):
    assert username_normalised(given) == counted


def test_a_normalised_username_is_cut_to_the_length_a_login_name_may_have():
    assert username_normalised("A" * 400) == "a" * 150


def test_a_failed_login_to_the_admin_site_is_an_audit_event_too(charlie):
    client = Client(REMOTE_ADDR="10.4.5.6")
    client.post("/admin/login/", {"username": "CHARLIE", "password": "wrong"})
    failed = Event.objects.get(type="auth.login_failed")
    assert (failed.actor, failed.payload) == ("charlie", {"username": "charlie", "address": "10.4.5.6"})
    assert not Event.objects.filter(type="auth.login").exists()


def test_a_failed_login_without_a_name_or_a_request_is_still_recorded():
    user_login_failed.send(sender=__name__, credentials={"username": "   "}, request=None)
    failed = Event.objects.get(type="auth.login_failed")
    assert (failed.actor, failed.payload) == ("(blank)", {"username": "", "address": ""})


def test_an_export_records_who_took_what_and_only_once_its_transaction_commits(charlie):
    with pytest.raises(RuntimeError), transaction.atomic():
        export_record(actor=charlie, what="audit.csv")
        raise RuntimeError("the download failed before it was sent")
    assert not Event.objects.filter(type="export.downloaded").exists()
    export_record(actor=charlie, what="x" * 500, filters={"run": "7"})
    event = Event.objects.get(type="export.downloaded")
    assert (event.actor, event.payload) == ("charlie", {"what": "x" * 200, "filters": {"run": "7"}})
