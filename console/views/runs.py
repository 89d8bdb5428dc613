"""A run (live candidates table, best-so-far chart, pause and stop, why it waits) and a candidate (diffs,
charts, e2e grid, findings, logs, decisions, whether its comparison is stale, promote). Approve, veto and
re-benchmark are in console/views/review.py, a person's submission in console/views/submit.py."""

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from console import charts
from console.diffs import render_diff, render_source, unified_diff
from console.forms import ApproveForm, PromoteForm, VetoForm, format_routes
from console.views.candidates import one_axis_refusal, region_summary
from console.views.common import error_text
from loop import ranges, selectors, where_time
from loop.models import Candidate, Run, ServingConfig
from loop.roles import PROMOTE, check_permission
from loop.services import decisions, deployments
from loop.services.confirmations import confirmation_summary
from loop.services.runs import run_pause, run_resume, run_stop
from loop.staleness import candidate_staleness, measured_against_text, run_staleness
from loop.waiting import run_waiting

# The actions a run page may post, each to one service: a name outside this table is refused.
RUN_ACTIONS = {"pause": run_pause, "resume": run_resume, "stop": run_stop}


def row_key(candidate: Candidate, run: Run, cpu_mode: bool) -> tuple:
    """Everything a run page's row shows but its actions (templates/console/runs/_live.html caches the row's
    cells under it): two rows with the same key are the same HTML, so a row is drawn again exactly when what it
    shows has changed, and nothing needs invalidating. Built here, not in the template: resolving these values
    one by one in the template cost about as much as drawing the row."""
    evaluation, decision, stale = candidate.latest_evaluation, candidate.latest_decision, candidate.stale
    return (
        candidate.pk, candidate.number, candidate.status, candidate.stage, candidate.proposer,
        candidate.author.get_username() if candidate.author_id else None, candidate.reason_code,
        candidate.reason_text, run.incumbent_id == candidate.pk, cpu_mode, stale.text if stale else None,
        (evaluation.geomean_speedup, evaluation.speedup_ci_lo, evaluation.speedup_ci_hi, evaluation.e2e_delta)
        if evaluation else None,
        (decision.verdict, decision.reason_code, decision.reason_text) if decision else None,
    )


def _run_context(run: Run, page=1) -> dict:
    state = selectors.run_state(run, page)
    state["best_chart"] = charts.best_so_far(state["series"]) if state["series"] else None
    state["waiting"] = run_waiting(run)
    stale = run_staleness(run, state["candidates"])
    for candidate in state["candidates"]:
        candidate.stale = stale.get(candidate.pk)
        candidate.row_key = row_key(candidate, run, state["cpu_mode"])
    return state


def run_detail(request, pk):
    run = get_object_or_404(Run.objects.select_related("thesis__target", "incumbent", "created_by"), pk=pk)
    context = _run_context(run, request.GET.get("page", 1))
    if request.htmx:
        return render(request, "console/runs/_live.html", context)
    return render(request, "console/runs/detail.html", context)


@require_POST
def run_action(request, pk, action):
    run = get_object_or_404(Run, pk=pk)
    service = RUN_ACTIONS.get(action)
    if service is None:
        return redirect("run", pk=run.pk)
    kwargs = {"actor": request.user, "run": run}
    if action == "stop":
        kwargs["reason"] = request.POST.get("reason", "").strip()[:200] or f"stopped by {request.user.get_username()}"
    try:
        service(**kwargs)
    except (ValidationError, ValueError) as error:
        messages.error(request, f"Could not {action} run {run.pk}: {error_text(error)}")
    else:
        messages.success(request, f"Run {run.pk}: {action} done.")
    return redirect("run", pk=run.pk)


def _promote_initial(state: dict) -> tuple[str, dict | None, str]:
    """Routes prefilled from range analysis of the candidate's report along the target's axis."""
    if not state["shapes"] or not state["axis"]:
        return "", None, ""
    try:
        analysis = ranges.analyze(state["report"], axis=state["axis"], baseline=ranges.DEFAULT)
    except (ValueError, KeyError, TypeError) as error:
        return "", None, f"Range analysis could not run: {error}"
    if not any(route.get("kernel") == ranges.CANDIDATE for route in analysis.routes):
        return "", analysis.to_json(), "Range analysis found no range where the candidate wins."
    return format_routes(list(analysis.routes)), analysis.to_json(), ""


def _candidate_context(request, candidate: Candidate, *, approve_form=None, veto_form=None, promote_form=None) -> dict:
    state = selectors.candidate_state(candidate)
    state["stale"] = candidate_staleness(candidate)
    state["measured"] = measured_against_text(candidate)
    state["waiting"] = run_waiting(candidate.run) if not candidate.is_final else None
    parent_diff = candidate.diff
    if not parent_diff and candidate.parent_id:
        parent_diff = unified_diff(candidate.parent.source, candidate.source,
                                   old_name=f"candidate {candidate.parent.number}", new_name=f"candidate {candidate.number}")
    state["parent_diff_html"] = render_diff(parent_diff) if (parent_diff or candidate.parent_id) else None
    incumbent = state["incumbent"]
    state["incumbent_diff_html"] = render_diff(unified_diff(
        incumbent.source, candidate.source, old_name=f"incumbent (candidate {incumbent.number})",
        new_name=f"candidate {candidate.number}")) if incumbent else None
    state["source_html"] = render_source(candidate.source)
    routes_text, analysis, analysis_note = _promote_initial(state)
    state["analysis"], state["analysis_note"] = analysis, analysis_note
    state["shape_chart"] = charts.per_shape(state["shapes"], axis=state["axis"],
                                            crossovers=(analysis or {}).get("crossovers")) if state["shapes"] else None
    entries = selectors.benchmark_entries(state["read"])
    state["distribution_chart"] = charts.distribution(entries, [s["label"] for s in state["shapes"]])
    state["time_profile"] = where_time.shape_profiles(state["read"])
    state["kernel_chart"] = where_time.kernel_chart(state["time_profile"])
    state["counters"] = where_time.counters(state["read"])
    state["ceilings"] = where_time.ceiling_points(state["read"])
    state["approve_form"] = approve_form or ApproveForm()
    state["veto_form"] = veto_form or VetoForm()
    state["regions"] = region_summary(candidate, state["evaluation"])  # a two-axis target is promoted on its regions page
    state["promote_form"] = promote_form or PromoteForm(initial={"routes": routes_text}, user=request.user)
    state["promote_open"] = bool(promote_form is not None and promote_form.errors)
    # the version in force when the page was drawn: a promote decided against an older one is told (docs/domain.md)
    latest = ServingConfig.objects.filter(target=candidate.run.thesis.target, hardware=candidate.run.hardware)
    state["retiming"] = confirmation_summary(candidate) if candidate.status == Candidate.Status.KEPT else None
    state["serving_version"] = latest.order_by("-version").values_list("version", flat=True).first() or 0
    return state


def candidate_detail(request, pk):
    candidate = get_object_or_404(Candidate.objects.select_related("run__thesis__target", "parent", "author"), pk=pk)
    if request.htmx and request.GET.get("part") == "status":
        return render(request, "console/candidates/_status.html",
                      {**selectors.candidate_state(candidate), "stale": candidate_staleness(candidate),
                       "measured": measured_against_text(candidate)})
    return render(request, "console/candidates/detail.html", _candidate_context(request, candidate))


@require_POST
def candidate_promote(request, pk):
    candidate = get_object_or_404(Candidate.objects.select_related("run__thesis__target"), pk=pk)
    form = PromoteForm(request.POST, user=request.user, request=request)
    if form.is_valid():
        try:
            decisions.four_eyes_check(actor=request.user, candidate=candidate)  # PermissionDenied: a 403 page
            check_permission(request.user, PROMOTE)  # a viewer learns nothing about the target from this POST
            if refusal := one_axis_refusal(candidate):
                raise ValidationError(refusal)
            based_on = request.POST.get("based_on", "")
            config = deployments.deployment_promote(actor=request.user, candidate=candidate,
                                                    routes=form.cleaned_data["routes"], note=form.cleaned_data["note"],
                                                    based_on=int(based_on) if based_on.isdigit() else None)
        except deployments.AlreadyDone as done:
            messages.info(request, error_text(done))
            return redirect("deployment", target=done.config.target.name, hardware=done.config.hardware)
        except (ValidationError, ValueError) as error:
            form.add_error(None, error_text(error))
            messages.error(request, f"Not promoted: {error_text(error)}")
        else:
            messages.success(request, f"Promoted: serving config v{config.version} for "
                                      f"{config.target.name} on {config.hardware}.")
            return redirect("deployment", target=config.target.name, hardware=config.hardware)
    return render(request, "console/candidates/detail.html",
                  _candidate_context(request, candidate, promote_form=form), status=400)
