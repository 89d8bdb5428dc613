"""Login rate limiting: after ARK_LOGIN_MAX_FAILURES failed logins for one (username, client address)
within ARK_LOGIN_LOCKOUT_S, further attempts are refused (HTTP 429) without checking the password
until the window that began with the first failure has passed. Counters live in the shared cache
(Redis), so every web process sees them. The address is REMOTE_ADDR: a proxy in front must set it."""

from __future__ import annotations

import hashlib
import math
import time

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.core.cache import caches


def _keys(username: str, address: str) -> tuple[str, str]:
    digest = hashlib.sha256(f"{username.strip().lower()}|{address}".encode()).hexdigest()[:32]
    return f"ark:login-fail:{digest}:n", f"ark:login-fail:{digest}:t0"


class LoginRateLimit:
    def __init__(self, username: str, address: str):
        self.cache = caches[settings.ARK_LOGIN_RATE_CACHE]
        self.window_s = float(settings.ARK_LOGIN_LOCKOUT_S)
        self.max_failures = int(settings.ARK_LOGIN_MAX_FAILURES)
        self.count_key, self.start_key = _keys(username, address)

    def seconds_locked(self) -> float:
        """How long attempts stay refused (0: allowed)."""
        count, start = self.cache.get(self.count_key, 0), self.cache.get(self.start_key)
        if start is None or count < self.max_failures:
            return 0.0
        left = start + self.window_s - time.time()
        if left <= 0:
            self.clear()
            return 0.0
        return left

    def record_failure(self) -> None:
        ttl = math.ceil(self.window_s) + 1
        self.cache.add(self.start_key, time.time(), ttl)
        self.cache.add(self.count_key, 0, ttl)
        try:
            self.cache.incr(self.count_key)
        except ValueError:  # expired between add and incr
            self.cache.add(self.count_key, 1, ttl)

    def clear(self) -> None:
        self.cache.delete_many([self.count_key, self.start_key])


class RateLimitedLoginView(auth_views.LoginView):
    def post(self, request, *args, **kwargs):
        self.limit = LoginRateLimit(request.POST.get("username", ""), request.META.get("REMOTE_ADDR", ""))
        left = self.limit.seconds_locked()
        if left:
            form = self.get_form()
            form.errors.clear()
            form.add_error(None, f"Too many failed logins. Try again in {math.ceil(left)} s.")
            return self.render_to_response(self.get_context_data(form=form), status=429)
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form):
        self.limit.record_failure()
        return super().form_invalid(form)

    def form_valid(self, form):
        self.limit.clear()
        return super().form_valid(form)
