from django.contrib.auth.decorators import login_not_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from console.forms import PingForm
from loop import selectors
from loop.services import wiring
from loop.waiting import runs_waiting


@login_not_required
def healthz(request):
    return HttpResponse("ok", content_type="text/plain")


def dashboard(request):
    state = selectors.dashboard_state()
    waiting = runs_waiting([p["run"] for p in state["active_runs"]])
    for p in state["active_runs"]:
        p["waiting"] = waiting.get(p["run"].pk)  # "waiting for an h200 worker; none seen since ..."
    return render(request, "console/dashboard.html", state)


@require_POST
def ping(request):
    form = PingForm(request.POST)
    if not form.is_valid():
        error = " ".join(form.errors.get("hardware", ["Name a hardware kind."]))
        if request.htmx:  # htmx swaps a 200 only: the table comes back with the reason above it
            return render(request, "console/_pings.html", {"pings": selectors.recent_pings(), "error": error})
        return HttpResponse(f"Ping refused: {error}", status=400, content_type="text/plain; charset=utf-8")
    wiring.ping_send(actor=request.user, hardware=form.cleaned_data["hardware"])
    if request.htmx:
        return render(request, "console/_pings.html", {"pings": selectors.recent_pings()})
    return redirect("dashboard")
