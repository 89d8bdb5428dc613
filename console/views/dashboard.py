from django.contrib.auth.decorators import login_not_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from loop import selectors
from loop.services import wiring


@login_not_required
def healthz(request):
    return HttpResponse("ok", content_type="text/plain")


def dashboard(request):
    return render(request, "console/dashboard.html", selectors.dashboard_state())


@require_POST
def ping(request):
    hardware = request.POST.get("hardware", "").strip() or "cpu"
    wiring.ping_send(actor=request.user, hardware=hardware)
    if request.htmx:
        return render(request, "console/_pings.html", {"pings": selectors.recent_pings()})
    return redirect("dashboard")
