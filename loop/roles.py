"""Roles are Django groups with the permissions services check.

viewer: reads everything; reviewer: theses, skills, approve, veto; deployer: promote, rollback;
admin: a superuser.
"""

from django.core.exceptions import PermissionDenied

VIEWER, REVIEWER, DEPLOYER, ADMIN = "viewer", "reviewer", "deployer", "admin"
EDIT_THESIS = "loop.edit_thesis"
REVIEW = "loop.review_candidate"
PROMOTE = "loop.promote"

GROUP_PERMISSIONS = {
    VIEWER: [],
    REVIEWER: [EDIT_THESIS, REVIEW],
    DEPLOYER: [PROMOTE],
}


def ensure_groups(**kwargs) -> None:
    # local: called from a post_migrate signal, once the auth app is ready
    from django.contrib.auth.models import Group, Permission

    for name, perms in GROUP_PERMISSIONS.items():
        group, _ = Group.objects.get_or_create(name=name)
        for dotted in perms:
            app_label, codename = dotted.split(".")
            permission = Permission.objects.filter(content_type__app_label=app_label, codename=codename).first()
            if permission is not None:
                group.permissions.add(permission)


def roles_of(user) -> set[str]:
    return roles_from(user.groups.values_list("name", flat=True), is_superuser=user.is_superuser)


def roles_from(group_names, *, is_superuser: bool) -> set[str]:
    """A user's roles from the names of their groups (pages read those with the permissions: console/auth.py)."""
    roles = set(group_names)
    if is_superuser:
        roles |= {ADMIN, REVIEWER, DEPLOYER, VIEWER}
    return roles


def check_permission(user, permission: str) -> None:
    """Raise PermissionDenied unless `user` holds `permission` (services call this first)."""
    if user is None or not user.is_authenticated or not user.has_perm(permission):
        raise PermissionDenied(f"{getattr(user, 'username', 'anonymous')} lacks {permission}")
