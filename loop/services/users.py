"""People and their roles, managed by admins from the console (the Users page) or `manage.py` (README).

Roles are the groups of loop.roles (viewer, reviewer, deployer); admin is a superuser. Every change is an
audit event; an admin cannot take their own admin role away (someone must be left to manage people)."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from loop import roles
from loop.audit import event_write

ASSIGNABLE = (roles.VIEWER, roles.REVIEWER, roles.DEPLOYER)


def _check_admin(actor) -> None:
    if actor is None or not actor.is_authenticated or not actor.is_superuser:
        raise PermissionDenied("only an admin manages people and roles")


def _clean_roles(wanted) -> list[str]:
    unknown = sorted(set(wanted) - set(ASSIGNABLE))
    if unknown:
        raise ValidationError({"roles": f"unknown roles: {', '.join(unknown)}"})
    return sorted(set(wanted))


def user_create(*, actor, username: str, password: str, roles_wanted=(), admin: bool = False):
    _check_admin(actor)
    User = get_user_model()
    username = (username or "").strip()
    if not username:
        raise ValidationError({"username": "a login name is needed"})
    if User.objects.filter(username__iexact=username).exists():
        raise ValidationError({"username": f"{username} exists already; change their roles instead"})
    wanted = _clean_roles(roles_wanted)
    user = User(username=username, is_superuser=admin, is_staff=admin)
    try:
        validate_password(password, user)
    except ValidationError as error:
        raise ValidationError({"password": error.messages}) from error
    roles.ensure_groups()
    with transaction.atomic():
        user.set_password(password)
        user.save()
        user.groups.set(Group.objects.filter(name__in=wanted))
        event_write(type="user.created", actor=actor, payload={"username": username, "roles": wanted, "admin": admin})
    return user


def user_roles_set(*, actor, user, roles_wanted=(), admin: bool = False):
    _check_admin(actor)
    wanted = _clean_roles(roles_wanted)
    if user.pk == actor.pk and not admin:
        raise ValidationError("you cannot take your own admin role away; ask another admin")
    roles.ensure_groups()
    with transaction.atomic():
        before = {"roles": sorted(user.groups.values_list("name", flat=True)), "admin": user.is_superuser}
        after = {"roles": wanted, "admin": admin}
        if before == after:
            return user
        user.is_superuser = user.is_staff = admin
        user.save(update_fields=["is_superuser", "is_staff"])
        user.groups.set(Group.objects.filter(name__in=wanted))
        event_write(type="user.roles_changed", actor=actor, payload={"username": user.get_username(),
                                                                     "before": before, "after": after})
    return user
