"""People and roles: only an admin changes them, only to known roles, setting the same roles twice writes
nothing, and the admin role carries staff access with it both ways."""

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError

from loop import roles
from loop.models import Event
from loop.services.users import user_create, user_roles_set

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-unusual-pass-9"


@pytest.fixture
def admin(django_user_model):
    return django_user_model.objects.create_superuser("root-admin", password="admin-password-1")


def test_a_reviewer_can_neither_add_a_person_nor_change_roles_even_their_own(alice, charlie):
    with pytest.raises(PermissionDenied):
        user_create(actor=alice, username="erin", password=PASSWORD, roles_wanted=["viewer"])
    with pytest.raises(PermissionDenied):
        user_roles_set(actor=alice, user=alice, roles_wanted=["reviewer", "deployer"])
    with pytest.raises(PermissionDenied):
        user_roles_set(actor=alice, user=charlie, roles_wanted=[], admin=True)
    assert not get_user_model().objects.filter(username="erin").exists()
    assert roles.roles_of(alice) == {"reviewer"} and roles.roles_of(charlie) == {"viewer"}
    assert not get_user_model().objects.get(pk=charlie.pk).is_superuser
    assert not Event.objects.filter(type__startswith="user.").exists()


def test_an_unknown_role_or_a_blank_name_is_refused_and_nothing_is_written(admin, charlie):
    with pytest.raises(ValidationError) as refused:
        user_create(actor=admin, username="erin", password=PASSWORD, roles_wanted=["viewer", "owner"])
    assert "unknown roles: owner" in str(refused.value)
    with pytest.raises(ValidationError) as refused:
        user_create(actor=admin, username="   ", password=PASSWORD)
    assert "username" in refused.value.message_dict
    with pytest.raises(ValidationError):
        user_roles_set(actor=admin, user=charlie, roles_wanted=["admin"])  # admin is a flag, not a group
    assert get_user_model().objects.count() == 2
    assert roles.roles_of(charlie) == {"viewer"}
    assert not Event.objects.filter(type__startswith="user.").exists()


def test_setting_the_roles_a_person_already_has_writes_no_event(admin, charlie):
    user_roles_set(actor=admin, user=charlie, roles_wanted=["reviewer", "viewer"])
    user_roles_set(actor=admin, user=charlie, roles_wanted=["viewer", "reviewer", "reviewer"])
    (event,) = Event.objects.filter(type="user.roles_changed")
    assert event.payload == {"username": "charlie", "before": {"roles": ["viewer"], "admin": False},
                             "after": {"roles": ["reviewer", "viewer"], "admin": False}}


def test_the_admin_role_gives_and_takes_staff_access_with_it(admin, dana):
    user_roles_set(actor=admin, user=dana, roles_wanted=["deployer"], admin=True)
    dana.refresh_from_db()
    assert (dana.is_superuser, dana.is_staff) == (True, True)
    # the new admin may take the first one's admin role away: only one's own is protected
    user_roles_set(actor=dana, user=admin, roles_wanted=["viewer"], admin=False)
    admin.refresh_from_db()
    assert (admin.is_superuser, admin.is_staff) == (False, False)
    assert roles.roles_of(admin) == {"viewer"}
    assert [e.actor for e in Event.objects.filter(type="user.roles_changed").order_by("id")] == ["root-admin", "dana"]


def test_an_admin_created_by_an_admin_can_manage_people(admin):
    erin = user_create(actor=admin, username=" erin ", password=PASSWORD, admin=True)
    assert (erin.username, erin.is_superuser, erin.is_staff) == ("erin", True, True)
    assert erin.check_password(PASSWORD)
    frank = user_create(actor=erin, username="frank", password=PASSWORD, roles_wanted=["deployer"])
    assert roles.roles_of(frank) == {"deployer"} and not frank.is_superuser
    assert Event.objects.get(type="user.created", actor="erin").payload == {
        "username": "frank", "roles": ["deployer"], "admin": False}
