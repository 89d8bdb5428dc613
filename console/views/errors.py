from django.shortcuts import render


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
    return render(request, "console/error.html",
                  {"title": "Something went wrong", "message": "The error was logged; nothing was lost."},
                  status=500)
