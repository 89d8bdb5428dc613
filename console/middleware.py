"""Two answers in place of a 500.

A database that refuses connections (its connection limit reached, restarting) answers 503 with
Retry-After, a page that says to try again, instead of a 500 (docs/reliability.md, Faults).

Django turns an exception raised inside the middleware chain (the session and user lookups happen
there) into a 500 response before an outer middleware sees it, so the error is noted on the request
when Django signals it (`got_request_exception`, inside its except block) and the outermost
middleware replaces that response.

A NUL character in a query or form value is a 400: PostgreSQL's text columns cannot hold one, so a filter
or a save that passes it on fails there (SQLite takes it: the two databases differed, docs/conventions.md).
No value the console reads may hold one."""

import logging
import sys

from django.core.exceptions import BadRequest
from django.core.signals import got_request_exception
from django.db import OperationalError, connections
from django.dispatch import receiver
from django.http import HttpResponse
from django.views import debug

log = logging.getLogger(__name__)
RETRY_AFTER_S = 5
PAGE = ("<!doctype html><title>ark: busy</title><h1>The database is busy</h1>"
        "<p>ark could not get a database connection for this request. Please try again in a few seconds.</p>")


def _unavailable(request) -> HttpResponse:
    response = HttpResponse(PAGE, status=503, content_type="text/html; charset=utf-8")
    response["Retry-After"] = str(RETRY_AFTER_S)
    response["Cache-Control"] = "no-store"
    return response


@receiver(got_request_exception)
def _note_database_unavailable(sender, request=None, **kwargs):
    if request is not None and isinstance(sys.exc_info()[1], OperationalError):
        request.ark_database_unavailable = True


class DatabaseUnavailableMiddleware:
    """First in MIDDLEWARE: a request that failed on an OperationalError gets a 503."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if getattr(request, "ark_database_unavailable", False):
            log.warning("503 for %s: the database refused a connection", request.path)
            return _unavailable(request)
        return response


class RefuseNulCharacters:
    """A GET or POST field (name or value) that holds a NUL character gets the console's 400 page."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        for fields in [request.GET] + ([request.POST] if request.method == "POST" else []):
            for name, values in fields.lists():
                if "\x00" in name or any("\x00" in v for v in values):
                    raise BadRequest(f"the field {name.replace(chr(0), '')!r} holds a NUL character")
        return self.get_response(request)


class ExceptionReporter(debug.ExceptionReporter):
    """Django's debug 500 page (DEBUG on), which under ASGI is built in a thread of the event loop's default
    pool. It shows each frame's variables with repr(), and the repr of an unevaluated queryset runs it: that
    opens a database connection in a thread that serves no request, so no request_finished ever closes it.
    Under a tight connection limit those connections kept the console at 503 until a restart. The page is
    built as before; then the connections this thread opened are closed (not one inside a transaction:
    a test's, or a sync request's own)."""

    def get_traceback_html(self):
        try:
            return super().get_traceback_html()
        finally:
            for conn in connections.all(initialized_only=True):
                if not conn.in_atomic_block:
                    conn.close()
