"""The dashboard's pings table re-reads itself every 2 s while a recent ping waits for its pong (the pong's live
event can land while the ping form's own answer is being swapped in, and be lost), and not otherwise."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from loop.models import Ping

pytestmark = pytest.mark.django_db


def _polls(client) -> bool:
    html = client.get(reverse("dashboard")).content.decode()
    table = html[html.index('<table id="pings"'):]
    return "every 2s" in table[:table.index(">")]


def test_the_pings_table_polls_only_while_a_recent_ping_waits(client, bob):
    client.force_login(bob)
    assert not _polls(client)  # no pings
    ping = Ping.objects.create(hardware="h200", actor="bob")
    assert _polls(client)
    Ping.objects.filter(pk=ping.pk).update(answered=timezone.now(), worker="w1")
    assert not _polls(client)
    Ping.objects.create(hardware="h200", actor="bob")
    Ping.objects.update(sent=timezone.now() - timedelta(minutes=5), answered=None)
    assert not _polls(client)  # nobody answered for minutes: no worker is behind it, no polling
