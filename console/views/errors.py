"""The console's error pages (400, 403, 404, 405, 500 and a refused form): in the console's own look, saying
in words what happened and where to go next. No internal names (permission codes, exception classes)."""

import re

from django.core.exceptions import BadRequest
from django.http import HttpResponseServerError
from django.shortcuts import render
from django.template import loader
from django.urls import reverse

from loop import roles

# A permission a service checks (loop.roles), in words: what it lets you do and the role that holds it.
_PERMISSION_WORDS = {
    roles.EDIT_THESIS: ("write or edit theses and skills, and start runs", roles.REVIEWER),
    roles.REVIEW: ("approve or veto candidates", roles.REVIEWER),
    roles.PROMOTE: ("promote a candidate or roll a deployment back", roles.DEPLOYER),
}
_LACKS = re.compile(r"\blacks (\S+)$")


def _links(request=None) -> list[tuple[str, str]]:
    links = [("Dashboard", reverse("dashboard")), ("Theses", reverse("theses"))]
    referer = request.META.get("HTTP_REFERER", "") if request is not None else ""
    if referer.startswith(("http://", "https://")) and request.get_host() in referer:
        links.insert(0, ("Back to the page you came from", referer))
    return links


def _page(request, status: int, title: str, what: str, next_step: str = ""):
    return render(request, "errors/error.html", {
        "status": status, "title": title, "what": what, "next": next_step, "links": _links(request)},
        status=status)


def not_found(request, exception=None):
    return _page(request, 404, "Not found",
                 f"There is no page at {request.path}. The link may be mistyped, or what it pointed to no longer exists.",
                 "Start again from the dashboard or the thesis list.")


def _admins() -> str:
    from django.contrib.auth import get_user_model  # local: the user model is only asked for on a 403 page

    names = list(get_user_model().objects.filter(is_superuser=True, is_active=True)
                 .order_by("username").values_list("username", flat=True)[:3])
    return ", ".join(names) if names else "an admin"


def permission_denied(request, exception=None):
    reason = str(exception or "")
    match = _LACKS.search(reason)
    user = getattr(request, "user", None)
    held = sorted(roles.roles_of(user)) if user is not None and user.is_authenticated else []
    held_words = f"Your roles: {', '.join(held)}." if held else "You hold no role yet."
    if match or not reason:
        action, role = _PERMISSION_WORDS.get(match.group(1) if match else "", ("do this", roles.REVIEWER))
        what = f"Your role does not let you {action}; that needs the {role} role. {held_words}"
        next_step = f"Ask an admin ({_admins()}) to give you the {role} role on the Users page."
    else:
        # The services' other refusals are sentences already (e.g. "the candidate's author may not promote it").
        what = f"This was refused: {reason[0].upper() + reason[1:]}."
        next_step = f"If it needs doing, ask someone who may, or an admin ({_admins()})."
    return _page(request, 403, "Not allowed", what, next_step)


def csrf_failure(request, reason=""):
    return _page(request, 403, "The form expired",
                 "The form you sent was opened before your last login or has expired, so it was not accepted. "
                 "Nothing was changed.", "Go back, reload the page and send it again.")


def bad_request(request, exception=None):
    # the console's own BadRequest says what was wrong (console.middleware.RefuseNulCharacters); others do not
    # (a SuspiciousOperation's text is for the log, not the page)
    said = str(exception) if type(exception) is BadRequest and str(exception) else ""
    return _page(request, 400, "Bad request",
                 f"The request could not be understood ({said}), so nothing was changed." if said else
                 "The request could not be understood, so nothing was changed.",
                 "Go back and try again from the page's own buttons and forms.")


def method_not_allowed(request, allowed: list[str]):
    verbs = " or ".join(allowed) or "other"
    return _page(request, 405, "Not available this way",
                 f"{request.path} takes {verbs} requests, not {request.method}. Actions (approve, promote, save) "
                 "happen through the buttons on their pages; opening an action's address in the browser does nothing.",
                 "Go back to the page and use its button.")


def server_error(request):
    """Rendered without the request's context: the context processors would look up the session and the
    user, which opens a database connection in the thread Django handles the exception in, a thread of
    the event loop's default pool under ASGI that no request_finished ever cleans up. Under a tight
    connection limit those leaked connections kept the console at 503 until a restart."""
    return HttpResponseServerError(loader.render_to_string("errors/error.html", {
        "status": 500, "title": "Something went wrong",
        "what": "The console hit an error it did not expect while answering this request. The error was logged "
                "with its details; whatever had been saved before is intact.",
        "next": "Try again; if it happens again, tell your admin what you did (the time and this address).",
        "links": [("Dashboard", reverse("dashboard"))]}))


class MethodNotAllowedPage:
    """Django's 405 (require_POST and friends) has an empty body: give it the page above."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if response.status_code == 405 and not response.content:
            allowed = [m.strip() for m in response.get("Allow", "").split(",") if m.strip()]
            page = method_not_allowed(request, allowed)
            page["Allow"] = response.get("Allow", "")
            return page
        return response
