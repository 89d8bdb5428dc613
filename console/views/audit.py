"""The audit log: every event, filterable, exported as CSV."""

import csv
import json
from urllib.parse import urlencode

from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import render

from loop import selectors

FILTERS = ("type", "run", "actor", "reason", "verdict")
CSV_COLUMNS = ("seq", "created", "type", "actor", "subject_type", "subject_id", "run_id", "payload", "hash")


def _filters(request) -> dict:
    return {name: request.GET.get(name, "").strip() for name in FILTERS}


def audit_list(request):
    filters = _filters(request)
    page = Paginator(selectors.audit_events(**filters), 100).get_page(request.GET.get("page"))
    query = urlencode({k: v for k, v in filters.items() if v})
    return render(request, "console/audit.html", {
        "page": page, "filters": filters, "choices": selectors.audit_filter_choices(), "query": query,
        "last_seq": selectors.last_seq(),
    })


def _csv_safe(value: str) -> str:
    """Spreadsheets run cells that start with = + - @ as formulas; prefix them with a quote (OWASP)."""
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def audit_csv(request):
    events = selectors.audit_events(**_filters(request)).order_by("id")
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="ark-audit.csv"'
    writer = csv.writer(response)
    writer.writerow(CSV_COLUMNS)
    for e in events.iterator():
        writer.writerow([_csv_safe(str(v)) for v in (
            e.id, e.created.isoformat(), e.type, e.actor, e.subject_type, e.subject_id,
            "" if e.run_id is None else e.run_id, json.dumps(e.payload, sort_keys=True), e.hash)])
    return response
