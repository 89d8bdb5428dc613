"""The Users page: admins add people and set their roles (loop/services/users.py); others may not open it."""

from django import forms
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from console.views.common import apply_validation_error, error_text
from loop.services import users as user_services

ROLE_CHOICES = [(r, r) for r in user_services.ASSIGNABLE]


class UserForm(forms.Form):
    username = forms.CharField(max_length=150, label="Login name")
    password = forms.CharField(widget=forms.PasswordInput, strip=False,
                               help_text="At least 8 characters, not a common one; give it to them privately.")
    roles = forms.MultipleChoiceField(choices=ROLE_CHOICES, required=False, widget=forms.CheckboxSelectMultiple,
                                      help_text="viewer reads; reviewer writes theses and skills, approves and "
                                                "vetoes; deployer promotes and rolls back.")
    admin = forms.BooleanField(required=False, help_text="Admins manage people, and hold every role.")


def _admin_only(request) -> None:
    if not request.user.is_superuser:
        raise PermissionDenied("only an admin manages people and roles")


def _people():
    return [{"user": u, "groups": sorted(g.name for g in u.groups.all()), "admin": u.is_superuser}
            for u in get_user_model().objects.order_by("username").prefetch_related("groups")]


def user_list(request):
    _admin_only(request)
    form = UserForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            user = user_services.user_create(actor=request.user, username=data["username"], password=data["password"],
                                             roles_wanted=data["roles"], admin=data["admin"])
        except ValidationError as error:
            apply_validation_error(form, error)
        else:
            messages.success(request, f"Added {user.get_username()}.")
            return redirect("users")
    return render(request, "console/users.html", {"people": _people(), "form": form, "assignable": ROLE_CHOICES},
                  status=400 if form.errors else 200)


@require_POST
def user_roles(request, pk):
    _admin_only(request)
    user = get_object_or_404(get_user_model(), pk=pk)
    try:
        user_services.user_roles_set(actor=request.user, user=user, roles_wanted=request.POST.getlist("roles"),
                                     admin=request.POST.get("admin") == "on")
    except ValidationError as error:
        messages.error(request, f"Roles of {user.get_username()} not changed: {error_text(error)}")
    else:
        messages.success(request, f"Roles of {user.get_username()} saved.")
    return redirect("users")
