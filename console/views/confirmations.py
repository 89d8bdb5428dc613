"""The "re-time now" action: queue an independent re-timing of a kept candidate before its promotion
(loop/services/confirmations.py; docs/keep-rule.md, What blocks a promotion)."""

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from console.views.common import error_text
from loop.models import Candidate
from loop.services.confirmations import confirmation_request


@require_POST
def candidate_retime(request, pk):
    candidate = get_object_or_404(Candidate, pk=pk)
    try:
        confirmation_request(actor=request.user, candidate=candidate)
    except ValidationError as error:
        messages.error(request, f"Not re-timed: {error_text(error)}")
    else:
        messages.success(request, f"Candidate {candidate.number} is queued to be re-timed on a {candidate.run.hardware} "
                                  "worker; this page shows the verdict when it comes.")
    return redirect("candidate", pk=candidate.pk)
