from console.auth import group_names
from loop import roles


def ark(request):
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"ark_roles": set()}
    # the groups come with the permissions, in the query the page's buttons need anyway (console/auth.py)
    return {"ark_roles": roles.roles_from(group_names(user), is_superuser=user.is_superuser)}
