"""The audit log: every event, filterable, exported as CSV (the export itself is an audited event)."""

import csv
import json
from urllib.parse import urlencode

from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import render

from console.forms import AuditFilterForm
from loop import selectors
from loop.services.access import export_record

# Events per page: each row costs about 1.7 ms to render, and the audit page is among the most read (docs/scaling.md).
AUDIT_PAGE_ROWS = 50
CSV_COLUMNS = ("seq", "created", "type", "actor", "subject_type", "subject_id", "run_id", "payload", "hash")


def _bad_filters(request, form):
    problems = "; ".join(f"{field}: {' '.join(errors)}" for field, errors in form.errors.items())
    return render(request, "console/audit.html", {
        "page": None, "filters": {k: request.GET.get(k, "")[:200] for k in AuditFilterForm.base_fields},
        "choices": selectors.audit_filter_choices(), "query": "", "last_seq": selectors.last_seq(),
        "filter_error": problems,
    }, status=400)


def audit_list(request):
    form = AuditFilterForm(request.GET)
    if not form.is_valid():
        return _bad_filters(request, form)
    filters = form.filters()
    page = Paginator(selectors.audit_events(**filters), AUDIT_PAGE_ROWS).get_page(form.cleaned_data.get("page"))
    query = urlencode({k: v for k, v in filters.items() if v})
    return render(request, "console/audit.html", {
        "page": page, "filters": filters, "choices": selectors.audit_filter_choices(), "query": query,
        "last_seq": selectors.last_seq(),
    })


def _csv_safe(value: str) -> str:
    """Spreadsheets run cells that start with = + - @ as formulas; prefix them with a quote (OWASP)."""
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def audit_csv(request):
    form = AuditFilterForm(request.GET)
    if not form.is_valid():
        return _bad_filters(request, form)
    filters = form.filters()
    events = selectors.audit_events(**filters).order_by("id")
    export_record(actor=request.user, what="audit.csv", filters={k: v for k, v in filters.items() if v})
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="ark-audit.csv"'
    writer = csv.writer(response)
    writer.writerow(CSV_COLUMNS)
    for e in events.iterator():
        writer.writerow([_csv_safe(str(v)) for v in (
            e.id, e.created.isoformat(), e.type, e.actor, e.subject_type, e.subject_id,
            "" if e.run_id is None else e.run_id, json.dumps(e.payload, sort_keys=True), e.hash)])
    return response
