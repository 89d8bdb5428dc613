"""Serving configs per target and hardware: the version in force, history, diffs, the tokens/s
waterfall, which route serves a shape, the workload profile, rollback, download; and a candidate's
winning regions with their effect against what serves now, and their promotion."""

import json

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from console import charts
from console.deployment_forms import ExplainForm, RegionPromoteForm, WorkloadForm, format_workload
from console.diffs import render_diff, unified_diff
from console.forms import RollbackForm
from console.views.common import error_text
from loop import impact, selectors
from loop.models import Candidate, ServingConfig, Target, WorkloadProfile
from loop.regions import analyze_candidate_grid, grid_axes
from loop.roles import PROMOTE, REVIEW, check_permission
from loop.services import candidates as candidate_services
from loop.services import decisions
from loop.services import deployments as deployment_services
from loop.services.access import export_record
from loop.services.workloads import workload_profile_set


def _pretty(config: ServingConfig) -> str:
    """The document for reading and diffing: kernel sources shown by their size (the download has them)."""
    document = json.loads(json.dumps(config.document))
    for route in document.get("routes") or []:
        kernel = route.get("kernel") if isinstance(route, dict) else None
        if isinstance(kernel, dict) and isinstance(kernel.get("source"), str):
            kernel["source"] = f"<{len(kernel['source'].splitlines())} lines; in the downloaded JSON>"
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def deployment_list(request):
    return render(request, "console/deployments/list.html", {"configs": selectors.serving_overview(),
                                                             "backlog": impact.target_backlog()})


def _explain(request, current: ServingConfig) -> tuple[ExplainForm, dict | None]:
    """Which route of the version in force serves the shape asked for (?rows=..&n_ctx=..), and why."""
    axes = current.document.get("axes") or [current.axis]
    form = ExplainForm(request.GET if any(a in request.GET for a in axes) else None, axes=axes)
    if not form.is_bound or not form.is_valid():
        return form, None
    shape = {a: form.cleaned_data[a] for a in axes}
    table = impact._table(current)
    index, route = table.route_for(shape) if table else (None, None)
    bounds = {a: [lo, hi] for a, lo, hi in route.bounds} if route else None
    return form, {"shape": shape, "route": index, "kernel": impact.serving_owner(table, shape), "bounds": bounds,
                  "evidence": route.evidence if route else None,
                  "e2e": selectors.route_e2e_calls(route.evidence, bounds) if route else None}


def _detail_context(request, target, hardware, rollback_form=None, workload_form=None):
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
    falls = impact.serving_waterfall(target, hardware)
    explain_form, explained = _explain(request, versions[0])
    profile = WorkloadProfile.objects.filter(target=target).first()
    axes = list(grid_axes(target) or target.axes or [])
    return {
        "target": target, "hardware": hardware, "versions": versions, "current": versions[0],
        "current_json": _pretty(versions[0]), "diff_html": diff_html, "a": a, "b": b,
        "waterfall": charts.waterfall(falls) or None, "falls": falls,
        "explain_form": explain_form, "explained": explained, "profile": profile,
        "workload_form": workload_form or WorkloadForm(axes=axes, initial={
            "cells": format_workload(profile.cells) if profile else ""}),
        "rollback_form": rollback_form or RollbackForm(
            initial={"to_version": versions[1].version if len(versions) > 1 else None}),
    }


def deployment_detail(request, target, hardware):
    target = get_object_or_404(Target, name=target)
    return render(request, "console/deployments/detail.html", _detail_context(request, target, hardware))


@require_POST
def deployment_workload(request, target, hardware):
    """Replace the target's workload profile with the cells typed in (loop/services/workloads.py)."""
    target = get_object_or_404(Target, name=target)
    if not request.user.has_perm("loop.promote"):
        raise PermissionDenied("editing the workload profile needs the promote permission")
    form = WorkloadForm(request.POST, axes=list(grid_axes(target) or target.axes or []))
    if form.is_valid():
        try:
            workload_profile_set(target, form.cleaned_data["cells"], actor=request.user, source="console")
        except ValidationError as error:
            form.add_error("cells", error_text(error))
        else:
            messages.success(request, f"Workload profile of {target.name} saved.")
            return redirect("deployment", target=target.name, hardware=hardware)
    return render(request, "console/deployments/detail.html",
                  _detail_context(request, target, hardware, workload_form=form), status=400)


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
        based_on = request.POST.get("based_on")
        try:
            config = deployment_services.deployment_rollback(
                actor=request.user, target=target, hardware=hardware, to_version=form.cleaned_data["to_version"],
                based_on=int(based_on) if based_on and based_on.isdigit() else None)
        except deployment_services.AlreadyDone as done:
            messages.info(request, error_text(done))
            return redirect("deployment", target=target.name, hardware=hardware)
        except (ValidationError, ValueError) as error:
            form.add_error(None, error_text(error))
        else:
            messages.success(request, f"Rolled back: v{config.version} serves what v{form.cleaned_data['to_version']} did.")
            return redirect("deployment", target=target.name, hardware=hardware)
    return render(request, "console/deployments/detail.html",
                  _detail_context(request, target, hardware, rollback_form=form), status=400)


def _e2e_route_hits(candidate: Candidate) -> dict | None:
    """What the e2e gate's dispatcher served in the candidate's latest report: calls per route over the
    grid and which routes served each point (gpu_worker/e2e/gate.py); None when the report has no counts."""
    evaluation = candidate.evaluations.order_by("-attempt").first()
    read = selectors.read_report(evaluation.report) if evaluation else None
    stage = read.stages.e2e if read else None
    if stage is None or not stage.route_hits:
        return None
    points = [{"batch": p.batch, "context": p.context, "served": [r for r in p.route_hits if r.get("calls")]}
              for p in stage.points if p.route_hits]
    return {"routes": stage.route_hits, "points": points, "mode": stage.mode, "routed": stage.routes is not None,
            "attempt": evaluation.attempt}


def _regions_context(request, candidate: Candidate, form=None) -> dict:
    run = candidate.run
    target = run.thesis.target
    grid = analyze_candidate_grid(candidate, baseline="default")
    current = ServingConfig.objects.filter(target=target, hardware=run.hardware).order_by("-version").first()
    effect = impact.promotion_impact(candidate, grid, current) if grid else None
    data = grid.to_json() if grid else None
    return {"candidate": candidate, "run": run, "target": target, "grid": data, "current": current,
            "has_grid": grid_axes(target) is not None, "e2e_hits": _e2e_route_hits(candidate),
            "heatmap": charts.region_heatmap(data, effect) if data else None, "impact": effect,
            "left_out": [c for c in (data or {}).get("cells", []) if c["status"] != "win"],
            "form": form or RegionPromoteForm(initial={"based_on": current.version if current else 0})}


def candidate_regions(request, pk):
    """Where a candidate wins over its target's two axes, the routes that serve only there, and what
    promoting them would change against the serving config in force now."""
    candidate = get_object_or_404(Candidate.objects.select_related("run__thesis__target"), pk=pk)
    return render(request, "console/deployments/regions.html", _regions_context(request, candidate))


@require_POST
def candidate_regions_measure(request, pk):
    """Measure a candidate awaiting review again with its e2e gate serving it only in its proposed boxes,
    so the end-to-end verdict is the one of the routes that would be promoted."""
    check_permission(request.user, REVIEW)  # before the grid: a viewer learns nothing from this POST
    candidate = get_object_or_404(Candidate.objects.select_related("run__thesis__target"), pk=pk)
    grid = analyze_candidate_grid(candidate, baseline="default")  # recomputed: the page's routes, not the post's
    try:
        if grid is None or not grid.routes:
            raise ValidationError("This candidate wins no region of its target's grid: no routes to measure.")
        candidate_services.candidate_rebenchmark(candidate=candidate, actor=request.user,
                                                 e2e_routes=[dict(r) for r in grid.routes])
    except ValidationError as error:
        messages.error(request, f"Not queued: {error_text(error)}")
        return redirect("candidate_regions", pk=candidate.pk)
    messages.success(request, f"Candidate {candidate.number} is queued to be measured again, its e2e gate serving it "
                              f"in its {len(grid.routes)} proposed box(es) only.")
    return redirect("candidate", pk=candidate.pk)


@require_POST
def candidate_regions_promote(request, pk):
    check_permission(request.user, PROMOTE)  # before the grid: a viewer learns nothing from this POST
    candidate = get_object_or_404(Candidate.objects.select_related("run__thesis__target"), pk=pk)
    form = RegionPromoteForm(request.POST, user=request.user, request=request)
    if form.is_valid():
        grid = analyze_candidate_grid(candidate, baseline="default")  # recomputed: the page's routes, not the post's
        try:
            decisions.four_eyes_check(actor=request.user, candidate=candidate)
            if grid is None or not grid.routes:
                raise ValidationError("This candidate wins no region of its target's grid: nothing to promote.")
            config = deployment_services.deployment_promote(
                actor=request.user, candidate=candidate, routes=list(grid.routes), note=form.cleaned_data["note"],
                based_on=form.cleaned_data["based_on"])
        except deployment_services.AlreadyDone as done:
            messages.info(request, error_text(done))
            return redirect("deployment", target=candidate.run.thesis.target.name, hardware=candidate.run.hardware)
        except (ValidationError, PermissionDenied) as error:
            form.add_error(None, error_text(error))
        else:
            messages.success(request, f"Promoted: v{config.version} serves candidate {candidate.number} in its "
                                      f"{len(grid.routes)} winning region(s).")
            return redirect("deployment", target=config.target.name, hardware=config.hardware)
    return render(request, "console/deployments/regions.html", _regions_context(request, candidate, form), status=400)
