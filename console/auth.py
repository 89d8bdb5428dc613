"""Django's ModelBackend with a user's permissions and groups read in one query instead of three.

Every page asks for the user's permissions (its buttons depend on `perms`) and groups (the roles in the header).
ModelBackend reads the permissions with one query for the user's own and one for their groups'; the roles took
another query. Here one query reads the user's groups with their permissions and the user's own permissions
(a plain UNION ALL over Django's auth tables: the ORM spent about ten times as long building the query as the
database took to answer it). The result is the same set ModelBackend gives, cached on the user object for the
request as ModelBackend caches it (`_perm_cache`), beside the group names (docs/scaling.md, What a request
costs). A superuser holds every permission, read as ModelBackend reads it."""

import functools

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection


@functools.cache
def _sql(vendor: str) -> str:
    """The query, its table and column names from Django's models (`vendor` keys the quoting)."""
    q = connection.ops.quote_name
    User = get_user_model()
    user_groups, user_perms = User.groups.through._meta, User.user_permissions.through._meta
    group_perms = Group.permissions.through._meta

    def column(through, model):  # the through table's column that points at `model`
        return q(next(f.column for f in through.fields if f.is_relation and f.related_model is model))

    def pk(model):
        return q(model._meta.pk.column)

    name, app_label = q(Group._meta.get_field("name").column), q(ContentType._meta.get_field("app_label").column)
    codename, ctype_id = q(Permission._meta.get_field("codename").column), q(Permission._meta.get_field("content_type").column)
    group, perm, ctype = (q(m._meta.db_table) for m in (Group, Permission, ContentType))
    return (
        f"SELECT g.{name}, ct.{app_label}, p.{codename} FROM {q(user_groups.db_table)} ug "
        f"JOIN {group} g ON g.{pk(Group)} = ug.{column(user_groups, Group)} "
        f"LEFT JOIN {q(group_perms.db_table)} gp ON gp.{column(group_perms, Group)} = g.{pk(Group)} "
        f"LEFT JOIN {perm} p ON p.{pk(Permission)} = gp.{column(group_perms, Permission)} "
        f"LEFT JOIN {ctype} ct ON ct.{pk(ContentType)} = p.{ctype_id} "
        f"WHERE ug.{column(user_groups, User)} = %s "
        f"UNION ALL SELECT NULL, ct.{app_label}, p.{codename} FROM {q(user_perms.db_table)} up "
        f"JOIN {perm} p ON p.{pk(Permission)} = up.{column(user_perms, Permission)} "
        f"JOIN {ctype} ct ON ct.{pk(ContentType)} = p.{ctype_id} "
        f"WHERE up.{column(user_perms, User)} = %s"
    )


def _read(user) -> None:
    """The user's group names and, unless a superuser, permissions, from one query, kept on the user object."""
    with connection.cursor() as cursor:
        cursor.execute(_sql(connection.vendor), [user.pk, user.pk])
        rows = cursor.fetchall()
    user._ark_groups = {name for name, _, _ in rows if name is not None}
    if not user.is_superuser:
        user._perm_cache = {f"{app}.{codename}" for _, app, codename in rows if codename is not None}


def group_names(user) -> set[str]:
    """The names of the user's groups (roles, loop/roles.py), read with the user's permissions when not yet read."""
    if not hasattr(user, "_ark_groups"):
        _read(user)
    return user._ark_groups


class PermissionsInOneQuery(ModelBackend):
    def get_all_permissions(self, user_obj, obj=None):
        if not user_obj.is_active or user_obj.is_anonymous or obj is not None:
            return set()
        if not hasattr(user_obj, "_perm_cache"):
            if user_obj.is_superuser:
                user_obj._perm_cache = {f"{app}.{codename}" for app, codename in
                                        Permission.objects.values_list("content_type__app_label", "codename")}
            else:
                _read(user_obj)
        return user_obj._perm_cache
