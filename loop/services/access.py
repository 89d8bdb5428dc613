"""Who got in, who was refused, and what left the system: logins, failed logins and exports are audit events
(docs/security.md). Login events come from Django's auth signals, so the admin site's login is covered too."""

import unicodedata

from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.db import transaction
from django.dispatch import receiver

from loop.audit import event_write


def username_normalised(username) -> str:
    """The form a login is counted under: NFKC, as Django's login form applies before authenticating,
    then casefolded, so look-alikes (full-width letters, another case) share one counter."""
    return unicodedata.normalize("NFKC", str(username or "")).casefold().strip()[:150]


def _address(request) -> str:
    return (request.META.get("REMOTE_ADDR", "") if request is not None else "")[:64]


@receiver(user_logged_in, dispatch_uid="ark_login_event")
def login_record(sender, request, user, **kwargs):
    with transaction.atomic():
        event_write(type="auth.login", actor=user, subject=user, payload={"address": _address(request)})


@receiver(user_login_failed, dispatch_uid="ark_login_failed_event")
def login_failed_record(sender, credentials, request=None, **kwargs):
    attempted = username_normalised(credentials.get("username"))
    with transaction.atomic():
        event_write(type="auth.login_failed", actor=attempted or "(blank)",
                    payload={"username": attempted, "address": _address(request)})


def export_record(*, actor, what: str, **details) -> None:
    """An export leaving the console (a CSV, a zip, a serving config download)."""
    with transaction.atomic():
        event_write(type="export.downloaded", actor=actor, payload={"what": what[:200], **details})
