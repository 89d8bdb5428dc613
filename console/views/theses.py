"""Theses: the team-wide backlog, create and edit with a markdown preview, start a run."""

import functools
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from console.forms import PriorityForm, RunStartForm, ThesisEditForm, ThesisForm
from console.markdown import render_markdown
from console.views.common import apply_validation_error, error_text
from loop import selectors
from loop.models import Thesis
from loop.services import runs as run_services
from loop.services import theses as thesis_services
from loop.waiting import live_hardware_default

FILTERS = ("status", "owner", "target", "hardware", "q", "sort")
THESIS_COLUMNS = ["priority", "title", "owner", "status", "target", "hardware", "runs", "created"]


def thesis_list(request):
    filters = {name: request.GET.get(name, "").strip() for name in FILTERS}
    filters["sort"] = filters["sort"] or "priority"
    return render(request, "console/theses/list.html", {
        "theses": selectors.theses_list(**filters), "filters": filters, "choices": selectors.thesis_filter_choices(),
        "columns": _sort_links(filters),
    })


def _sort_links(filters: dict) -> list[dict]:
    """Each column header: its name, the link that sorts by it (again: reversed), and the current direction."""
    others = {k: v for k, v in filters.items() if v and k != "sort"}
    columns = []
    for name in THESIS_COLUMNS:
        if name not in selectors.THESIS_SORTS:
            columns.append({"name": name, "href": None, "arrow": ""})
            continue
        current = filters["sort"] in (name, f"-{name}")
        next_sort = name if filters["sort"] != name else f"-{name}"
        arrow = ("▼" if filters["sort"] == name else "▲") if current else ""
        columns.append({"name": name, "href": "?" + urlencode({**others, "sort": next_sort}), "arrow": arrow})
    return columns


def _thesis_form(request, form, thesis, save, saved: str):
    """A POSTed valid form goes through `save` (a service, returning the thesis) to the thesis page; the form
    comes back (400 with its errors, a service's refusal among them) otherwise."""
    if request.method == "POST" and form.is_valid():
        try:
            thesis = save(actor=request.user, **form.cleaned_data)
        except ValidationError as error:
            apply_validation_error(form, error)
        else:
            messages.success(request, saved)
            return redirect("thesis", pk=thesis.pk)
    return render(request, "console/theses/form.html", {"form": form, "thesis": thesis},
                  status=400 if form.errors else 200)


def thesis_new(request):
    # a new thesis's hardware defaults to what the live GPU workers report (loop/waiting.py)
    form = ThesisForm(request.POST or None, initial={"hardware": live_hardware_default()})
    return _thesis_form(request, form, None, thesis_services.thesis_create, "Thesis created.")


def _thesis_page(request, thesis, run_form, status=200):
    """A thesis page: its text, its runs' progress, and the run form (a fresh one, or one with its errors)."""
    return render(request, "console/theses/detail.html", {
        "thesis": thesis, "body_html": render_markdown(thesis.body),
        "constraints_html": render_markdown(thesis.constraints),
        "runs": selectors.runs_progress(thesis.runs.all()),
        "run_form": run_form, "priority_form": PriorityForm(initial={"priority": thesis.priority}),
    }, status=status)


def thesis_detail(request, pk):
    thesis = get_object_or_404(Thesis.objects.select_related("owner", "target"), pk=pk)
    return _thesis_page(request, thesis, RunStartForm(initial={"hardware": thesis.hardware}))


def thesis_edit(request, pk):
    thesis = get_object_or_404(Thesis, pk=pk)
    initial = {"title": thesis.title, "body": thesis.body, "target": thesis.target.name, "hardware": thesis.hardware,
               "model": thesis.model, "constraints": thesis.constraints, "priority": thesis.priority,
               "status": thesis.status}
    form = ThesisEditForm(request.POST or None, initial=initial)
    return _thesis_form(request, form, thesis, functools.partial(thesis_services.thesis_edit, thesis=thesis),
                        "Thesis saved.")


@require_POST
def markdown_preview(request):
    """The markdown of the field being edited, rendered exactly as the page will show it (htmx)."""
    text = next((request.POST[name] for name in ("body", "text", "constraints") if name in request.POST), "")
    return render(request, "console/_preview.html", {"html": render_markdown(text)})


@require_POST
def thesis_prioritise(request, pk):
    thesis = get_object_or_404(Thesis, pk=pk)
    form = PriorityForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Priority must be a whole number between -1000 and 1000.")
    else:
        thesis_services.thesis_prioritise(actor=request.user, thesis=thesis, priority=form.cleaned_data["priority"])
        messages.success(request, f"Priority set to {form.cleaned_data['priority']}.")
    if request.POST.get("next") == "list":
        return redirect("theses")
    return redirect("thesis", pk=thesis.pk)


@require_POST
def run_start(request, pk):
    thesis = get_object_or_404(Thesis.objects.select_related("owner", "target"), pk=pk)
    form = RunStartForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            run = run_services.run_start(
                actor=request.user, thesis=thesis, proposer=data["proposer"],
                proposer_settings=data["proposer_settings"], hardware=data["hardware"], profile=data["profile"],
                budget_candidates=data["budget_candidates"], budget_gpu_minutes=data["budget_gpu_minutes"],
                review_mode=data["review_mode"], policy=form.policy(),
            )
        except (ValidationError, ValueError) as error:
            form.add_error(None, error_text(error))
        else:
            messages.success(request, f"Run {run.pk} started.")
            return redirect("run", pk=run.pk)
    return _thesis_page(request, thesis, form, status=400)
