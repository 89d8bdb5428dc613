"""Admins add people and set their roles from the console; nobody else can; every change is audited."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from loop import roles
from loop.models import Event

pytestmark = pytest.mark.django_db


@pytest.fixture
def as_admin(django_user_model):
    admin = django_user_model.objects.create_superuser("root-admin", password="admin-password-1")
    client = Client()
    client.force_login(admin)
    return client


def test_an_admin_adds_a_person_with_roles(as_admin):
    response = as_admin.post(reverse("users"), {"username": "erin", "password": "a-long-unusual-pass-9",
                                                "roles": ["reviewer", "deployer"]})
    assert response.status_code == 302
    erin = get_user_model().objects.get(username="erin")
    assert erin.check_password("a-long-unusual-pass-9") and not erin.is_superuser
    assert roles.roles_of(erin) == {"reviewer", "deployer"}
    event = Event.objects.get(type="user.created")
    assert event.actor == "root-admin" and event.payload["roles"] == ["deployer", "reviewer"]
    assert "password" not in str(event.payload).replace("a-long", "")  # the password is never recorded
    assert 'data-testid="user-erin"' in as_admin.get(reverse("users")).content.decode()


def test_an_admin_changes_roles_and_the_change_is_audited(as_admin, charlie):
    as_admin.post(reverse("user_roles", args=[charlie.pk]), {"roles": ["reviewer"]})
    assert roles.roles_of(charlie) == {"reviewer"}
    event = Event.objects.get(type="user.roles_changed")
    assert event.payload["before"]["roles"] == ["viewer"] and event.payload["after"]["roles"] == ["reviewer"]


def test_a_weak_password_or_a_taken_name_is_refused_next_to_the_field(as_admin, charlie):
    page = as_admin.post(reverse("users"), {"username": "Charlie", "password": "a-long-unusual-pass-9"}).content.decode()
    assert "Charlie exists already" in page
    page = as_admin.post(reverse("users"), {"username": "frank", "password": "password"}).content.decode()
    assert "too common" in page and not get_user_model().objects.filter(username="frank").exists()
    assert get_user_model().objects.filter(username__iexact="charlie").count() == 1


def test_an_admin_cannot_drop_their_own_admin_role(as_admin):
    me = get_user_model().objects.get(username="root-admin")
    page = as_admin.post(reverse("user_roles", args=[me.pk]), {"roles": []}, follow=True).content.decode()
    assert "cannot take your own admin role away" in page
    me.refresh_from_db()
    assert me.is_superuser


def test_people_who_are_not_admins_cannot_open_or_post(as_alice, charlie):
    assert as_alice.get(reverse("users")).status_code == 403
    assert as_alice.post(reverse("user_roles", args=[charlie.pk]), {"roles": ["deployer"]}).status_code == 403
    assert roles.roles_of(charlie) == {"viewer"}
    assert "nav-users" not in as_alice.get(reverse("dashboard")).content.decode()


def test_the_shell_command_adds_a_person_and_sets_roles(as_admin, monkeypatch, capsys):
    from django.core.management import call_command

    monkeypatch.setattr("builtins.input", lambda: "a-long-unusual-pass-9")
    call_command("user_set", "gina", "--roles", "viewer", "--password-stdin")
    call_command("user_set", "gina", "--roles", "reviewer,deployer")
    gina = get_user_model().objects.get(username="gina")
    assert roles.roles_of(gina) == {"reviewer", "deployer"} and gina.check_password("a-long-unusual-pass-9")
    assert "gina: reviewer, deployer" in capsys.readouterr().out
