"""FlashInfer-Bench in the console (docs/interop.md): import a Definition (+ workloads) as a target, download a
run as a TraceSet. The work is in loop/services/fib.py; these views parse the form and answer."""

import io
import json
import tempfile
import zipfile
from pathlib import Path

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from loop.models import Run
from loop.roles import EDIT_THESIS, check_permission
from loop.services.access import export_record
from gpu_worker.fib.generators import KINDS
from gpu_worker.target_catalog import CATALOG
from loop.services.fib import fib_definition_import, fib_traceset_export, imported_targets

from .common import error_text

MAX_BYTES = 2_000_000


class DefinitionImportForm(forms.Form):
    definition = forms.FileField(help_text="A FlashInfer-Bench Definition (.json).")
    workloads = forms.FileField(required=False, help_text="Its workloads (.jsonl of workload traces): the "
                                                          "benchmark grid and how often each cell is served.")
    ranges = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3, "placeholder": "batch_size=1:16384"}),
                             help_text="The operating range of each var axis, one axis=lo:hi per line "
                                       "(an axis left out takes the workloads' span).")
    atol = forms.FloatField(required=False, min_value=0, help_text="Per-output absolute tolerance (default 0.01).")
    rtol = forms.FloatField(required=False, min_value=0, help_text="Per-output relative tolerance (default 0.01).")
    inputs = forms.CharField(
        required=False, label="Input generators",
        widget=forms.Textarea(attrs={"rows": 5, "placeholder": '{"seq_lens": {"kind": "lengths", "max": "max_num_pages * page_size"}}'}),
        help_text="JSON: for inputs the definition cannot describe (lengths, a page table over a cache, an FP8 "
                  "cache with its scales), which generator draws them: " + "; ".join(f"{k}: {v}" for k, v in KINDS.items())
                  + ". Other inputs are drawn by FlashInfer-Bench.")
    check = forms.ChoiceField(
        required=False, label="Check",
        choices=[("", "FlashInfer-Bench's per-output tolerance")] + [(n, f"{n}'s check (built-in target)") for n in sorted(CATALOG)],
        help_text="A built-in target with the same contract whose stronger check (and exact reference) replaces "
                  "the per-output tolerance, e.g. a top-k compared as sets with ties.")

    def clean_inputs(self):
        text = (self.cleaned_data.get("inputs") or "").strip()
        if not text:
            return {}
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"Not JSON: {exc}") from None
        if not isinstance(value, dict):
            raise forms.ValidationError("A JSON object: input name -> generator declaration.")
        return value

    def _text(self, name):
        upload = self.cleaned_data.get(name)
        if upload is None:
            return ""
        if upload.size > MAX_BYTES:
            raise forms.ValidationError({name: f"The file is {upload.size} bytes; the limit is {MAX_BYTES}."})
        try:
            return upload.read().decode("utf-8")
        except UnicodeDecodeError:
            raise forms.ValidationError({name: "The file is not UTF-8 text."}) from None

    def clean(self):
        data = super().clean()
        if not self.errors:
            data["definition_text"] = self._text("definition")
            data["workloads_text"] = self._text("workloads")
        return data


def definition_import(request):
    check_permission(request.user, EDIT_THESIS)
    form = DefinitionImportForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        tolerance = {k: data[k] for k in ("atol", "rtol") if data.get(k)}
        try:
            target = fib_definition_import(
                actor=request.user, definition_text=data["definition_text"], workloads_text=data["workloads_text"],
                ranges=[line.strip() for line in (data.get("ranges") or "").splitlines() if line.strip()],
                tolerance=tolerance, source=getattr(data.get("workloads") or data["definition"], "name", ""),
                inputs=data.get("inputs") or None, check=data.get("check") or None)
        except ValidationError as error:
            form.add_error(None, f"Import refused, nothing changed: {error_text(error)}")
        else:
            cells = len(target.document.get("cells") or [])
            drawn = ", ".join(f"{n} ({d['kind']})" for n, d in (target.document.get("inputs") or {}).items())
            messages.success(request, f"Imported {target.name}: {', '.join(f'{a} {lo}..{hi}' for a, (lo, hi) in target.axes.items())}"
                                      f"; {cells} workload cells" + (f"; drawn by ark: {drawn}" if drawn else "")
                                      + (f"; checked as {target.document['check']}" if target.document.get("check") else "")
                                      + ". Write a thesis on it to start a run.")
            captured = getattr(target, "captured_inputs", None) or {}
            if captured:
                messages.warning(request, "The workloads name captured inputs ark does not read ("
                                 + ", ".join(f"{n} on {c} lines" for n, c in captured.items())
                                 + "): their axes are the grid, their inputs are drawn (docs/interop.md).")
            return redirect("thesis_new")
    return render(request, "console/interop/import.html", {"form": form, "imported": imported_targets()})


def run_traceset(request, pk):
    """The run as a FlashInfer-Bench TraceSet, zipped (written to a temporary folder, then sent)."""
    run = get_object_or_404(Run.objects.select_related("thesis__target"), pk=pk)
    if request.method != "POST":
        raise PermissionDenied("export with the button on the run page")
    with tempfile.TemporaryDirectory(prefix="ark-traceset-") as tmp:
        try:
            fib_traceset_export(run=run, out=Path(tmp) / "traceset")
        except ValidationError as error:
            messages.error(request, f"Export refused: {error_text(error)}")
            return redirect("run", pk=run.pk)
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted((Path(tmp) / "traceset").rglob("*")):
                if path.is_file():
                    archive.write(path, Path(f"run-{run.pk}-traceset") / path.relative_to(Path(tmp) / "traceset"))
    export_record(actor=request.user, what="traceset.zip", run=run.pk)  # like every export leaving the console
    response = HttpResponse(buffer.getvalue(), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="ark-run-{run.pk}-traceset.zip"'
    return response
