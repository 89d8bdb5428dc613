"""Serving configs per target and hardware: the version in force, history, diffs, rollback, download."""

import json

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from console import charts
from console.diffs import render_diff, unified_diff
from console.forms import RollbackForm
from console.views.common import error_text
from loop import selectors
from loop.models import ServingConfig, Target
from loop.services import deployments as deployment_services
from loop.services.access import export_record


def _pretty(config: ServingConfig) -> str:
    """The document for reading and diffing: kernel sources shown by their size (the download has them)."""
    document = json.loads(json.dumps(config.document))
    for route in document.get("routes") or []:
        kernel = route.get("kernel") if isinstance(route, dict) else None
        if isinstance(kernel, dict) and isinstance(kernel.get("source"), str):
            kernel["source"] = f"<{len(kernel['source'].splitlines())} lines; in the downloaded JSON>"
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def deployment_list(request):
    return render(request, "console/deployments/list.html", {"configs": selectors.serving_overview()})


def _detail_context(request, target, hardware, rollback_form=None):
    versions = selectors.serving_versions(target, hardware)
    if not versions:
        raise Http404("no serving config")
    by_version = {c.version: c for c in versions}
    diff_html, a, b = None, None, None
    if len(versions) >= 2 or request.GET.get("a"):
        try:
            a = int(request.GET.get("a") or versions[1].version)
            b = int(request.GET.get("b") or versions[0].version)
        except ValueError:
            raise Http404("bad version") from None
        if a not in by_version or b not in by_version:
            raise Http404("no such version")
        diff_html = render_diff(unified_diff(_pretty(by_version[a]), _pretty(by_version[b]),
                                             old_name=f"v{a}.json", new_name=f"v{b}.json"))
    steps = selectors.promotion_steps(versions)
    return {
        "target": target, "hardware": hardware, "versions": versions, "current": versions[0],
        "current_json": _pretty(versions[0]), "diff_html": diff_html, "a": a, "b": b,
        "waterfall": charts.waterfall(steps) if steps else None, "steps": steps,
        "rollback_form": rollback_form or RollbackForm(
            initial={"to_version": versions[1].version if len(versions) > 1 else None}),
    }


def deployment_detail(request, target, hardware):
    target = get_object_or_404(Target, name=target)
    return render(request, "console/deployments/detail.html", _detail_context(request, target, hardware))


def deployment_download(request, target, hardware, version):
    config = get_object_or_404(ServingConfig, target__name=target, hardware=hardware, version=version)
    export_record(actor=request.user, what="serving config", target=config.target.name, hardware=config.hardware,
                  version=config.version)
    response = JsonResponse(config.document, json_dumps_params={"indent": 2, "sort_keys": True})
    response["Content-Disposition"] = f'attachment; filename="{config.target.name}-{config.hardware}-v{config.version}.json"'
    return response


@require_POST
def deployment_rollback(request, target, hardware):
    target = get_object_or_404(Target, name=target)
    form = RollbackForm(request.POST, user=request.user, request=request)
    if form.is_valid():
        try:
            config = deployment_services.deployment_rollback(actor=request.user, target=target, hardware=hardware,
                                                             to_version=form.cleaned_data["to_version"])
        except (ValidationError, ValueError) as error:
            form.add_error(None, error_text(error))
        else:
            messages.success(request, f"Rolled back: v{config.version} serves what v{form.cleaned_data['to_version']} did.")
            return redirect("deployment", target=target.name, hardware=hardware)
    return render(request, "console/deployments/detail.html",
                  _detail_context(request, target, hardware, rollback_form=form), status=400)
