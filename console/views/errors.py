from django.http import HttpResponseServerError
from django.shortcuts import render
from django.template import loader


def not_found(request, exception=None):
    return render(request, "console/error.html", {"title": "Not found", "message": "There is nothing here."},
                  status=404)


def permission_denied(request, exception=None):
    reason = str(exception) if exception is not None and str(exception) else "Your role does not allow this."
    return render(request, "console/error.html", {"title": "Not allowed", "message": reason}, status=403)


def bad_request(request, exception=None):
    return render(request, "console/error.html", {"title": "Bad request", "message": "The request was not understood."},
                  status=400)


def server_error(request):
    """Rendered without the request's context: the context processors would look up the session and the
    user, which opens a database connection in the thread Django handles the exception in, a thread of
    the event loop's default pool under ASGI that no request_finished ever cleans up. Under a tight
    connection limit those leaked connections kept the console at 503 until a restart."""
    return HttpResponseServerError(loader.render_to_string(
        "console/error.html", {"title": "Something went wrong", "message": "The error was logged; nothing was lost."}))
