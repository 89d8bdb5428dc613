"""Login throttling, with django-axes (settings: AXES_*; docs/security.md).

Failures are counted per (username, client address). The username is counted in the form authentication
itself sees it (NFKC, as Django's login form normalises before authenticating) and casefolded, so look-alikes
such as a full-width letter or another case share one counter. The address is REMOTE_ADDR: a proxy in front
must set it. A locked-out caller gets the login page with a message and HTTP 429, and the password is not
checked. The password re-entry on promote and rollback authenticates through the same path
(`password_confirm`), so it is throttled and audited like a login.
"""

from __future__ import annotations

import math

from django.conf import settings
from django.contrib.auth import authenticate
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.shortcuts import render

from loop.services.access import username_normalised


def axes_username(request, credentials=None) -> str:
    raw = (credentials or {}).get("username")
    if raw is None and request is not None:
        raw = request.POST.get("username", "")
    return username_normalised(raw)


def client_address(request) -> str:
    return request.META.get("REMOTE_ADDR", "") if request is not None else ""


def _message() -> str:
    seconds = settings.AXES_COOLOFF_TIME.total_seconds()
    wait = f"{math.ceil(seconds / 60)} minutes" if seconds >= 120 else f"{math.ceil(seconds)} s"
    return f"Too many failed logins. Try again in {wait}, or ask an admin to unlock the account."


def lockout_response(request, original_response=None, credentials=None):
    """The login page with the reason (HTTP 429), on the login URL or any form that re-checks a password."""
    form = AuthenticationForm(request, data=None)
    return render(request, "registration/login.html", {"form": form, "lockout": _message(), "next": ""},
                  status=429)


def password_confirm(request, user, password: str) -> bool:
    """Whether `password` is `user`'s, checked through authenticate() so axes throttles and counts it."""
    if request is None or user is None or not password:
        return False
    confirmed = authenticate(request, username=user.get_username(), password=password)
    return confirmed is not None and confirmed.pk == user.pk


class RateLimitedLoginView(auth_views.LoginView):
    """Django's login view; axes (backend and middleware) does the throttling."""
