"""A reviewer's verdicts on a candidate, each confirmed on the server: approve (a stale comparison asks
first), veto (always asks first), and re-benchmark against the current incumbent. A POST without
`confirm=yes` where confirmation is needed answers with the confirmation page and changes nothing
(docs/domain.md, Stale verdicts)."""

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from console.forms import ApproveForm, VetoForm
from console.views.common import error_text
from console.views.runs import _candidate_context
from loop.models import Candidate
from loop.roles import REVIEW, check_permission
from loop.services import candidates as candidate_services
from loop.services import decisions
from loop.staleness import candidate_staleness


def _back(request, candidate):
    return redirect("run", pk=candidate.run_id) if request.POST.get("next") == "run" else redirect(
        "candidate", pk=candidate.pk)


def _confirm_page(request, candidate, *, action: str, what: str, fields: dict, stale=None):
    return render(request, "console/candidates/confirm.html", {
        "candidate": candidate, "run": candidate.run, "action": action, "what": what, "fields": fields,
        "stale": stale, "next": request.POST.get("next", ""),
    })


def _confirmed(request) -> bool:
    return request.POST.get("confirm") == "yes"


def _review(request, pk, form_class, form_name: str, act, done: str):
    """A reviewer's POST: the candidate page again (400) with the form's errors; else `act(request,
    candidate, **the form's data)`, which answers with a confirmation page or None once the service ran,
    and the candidate is `done` (or the service's refusal is shown) back where the reviewer came from."""
    candidate = get_object_or_404(Candidate.objects.select_related("run__thesis", "run__incumbent"), pk=pk)
    check_permission(request.user, REVIEW)
    form = form_class(request.POST)
    if not form.is_valid():
        return render(request, "console/candidates/detail.html",
                      _candidate_context(request, candidate, **{form_name: form}), status=400)
    try:
        confirm = act(request, candidate, **form.cleaned_data)
    except (ValidationError, ValueError) as error:
        messages.error(request, f"Not {done}: {error_text(error)}")
    else:
        if confirm is not None:
            return confirm
        messages.success(request, f"Candidate {candidate.number} {done}.")
    return _back(request, candidate)


@require_POST
def candidate_approve(request, pk):
    return _review(request, pk, ApproveForm, "approve_form", _approve, "approved")


def _approve(request, candidate, *, note: str):
    stale = candidate_staleness(candidate)
    if stale is not None and not _confirmed(request):
        return _confirm_page(request, candidate, action="approve", stale=stale, fields={"note": note},
                             what=f"Approve candidate {candidate.number} although {stale.text}?")
    try:
        decisions.candidate_approve(actor=request.user, candidate=candidate, note=note,
                                    confirm_stale=_confirmed(request))
    except decisions.StaleVerdict as error:  # it became stale between the page and the click
        return _confirm_page(request, candidate, action="approve", stale=error.staleness, fields={"note": note},
                             what=f"Approve candidate {candidate.number} although {error.staleness.text}?")
    return None


@require_POST
def candidate_veto(request, pk):
    return _review(request, pk, VetoForm, "veto_form", _veto, "vetoed")


def _veto(request, candidate, *, reason: str):
    if not _confirmed(request):
        return _confirm_page(request, candidate, action="veto", fields={"reason": reason},
                             what=f"Veto candidate {candidate.number}? It is reverted with your reason; "
                                  "this cannot be undone.")
    decisions.candidate_veto(actor=request.user, candidate=candidate, reason=reason, confirmed=True)
    return None


@require_POST
def candidate_rebenchmark(request, pk):
    candidate = get_object_or_404(Candidate, pk=pk)
    try:
        candidate_services.candidate_rebenchmark(candidate=candidate, actor=request.user)
    except (ValidationError, ValueError) as error:
        messages.error(request, f"Not re-benchmarked: {error_text(error)}")
    else:
        messages.success(request, f"Candidate {candidate.number} is queued to be measured again against the "
                                  "current incumbent.")
    return _back(request, candidate)
