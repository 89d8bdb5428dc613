"""Django's ModelBackend with a user's permissions read in one query instead of two.

ModelBackend reads a user's own permissions and their groups' permissions with one query each, the first
time a request asks (every page asks: its buttons depend on `perms`). Here one query reads both; the result
is the same set, cached on the user object for the request as ModelBackend caches it (docs/scaling.md,
What a request costs)."""

from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import Permission
from django.db.models import Q


class PermissionsInOneQuery(ModelBackend):
    def get_all_permissions(self, user_obj, obj=None):
        if not user_obj.is_active or user_obj.is_anonymous or obj is not None:
            return set()
        if not hasattr(user_obj, "_perm_cache"):
            held = Permission.objects.all() if user_obj.is_superuser else Permission.objects.filter(
                Q(user=user_obj) | Q(group__user=user_obj))
            user_obj._perm_cache = {f"{app}.{codename}" for app, codename in
                                    held.values_list("content_type__app_label", "codename").order_by().distinct()}
        return user_obj._perm_cache
