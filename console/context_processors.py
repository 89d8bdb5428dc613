from loop import roles


def ark(request):
    user = getattr(request, "user", None)
    return {"ark_roles": roles.roles_of(user) if user is not None and user.is_authenticated else set()}
