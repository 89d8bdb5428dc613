"""A person proposes a candidate from the browser: the run's incumbent's source (or the target's seed, or an
uploaded file) in a code editor, a "check" that runs the guard and the submission checks and shows their
result before anything is queued, then submit: the candidate page follows it live like any other
(loop/proposers/human.py, loop/guard_check.py)."""

from django import forms
from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render

from loop.guard_check import source_check
from loop.models import Run
from loop.proposers.human import candidate_submit_human
from loop.roles import EDIT_THESIS, check_permission
from loop.services.candidates import MAX_SOURCE_BYTES, CandidateRejected
from loop.services.targets import target_seed_source


class SubmitForm(forms.Form):
    source = forms.CharField(required=False, strip=False, max_length=MAX_SOURCE_BYTES,
                             widget=forms.Textarea(attrs={"rows": 30, "data-editor": "python", "spellcheck": "false"}))
    upload = forms.FileField(required=False, help_text="A .py file replaces the text above.")
    note = forms.CharField(required=False, max_length=2000, help_text="What you changed and why (shown with it).")

    def clean_upload(self):
        upload = self.cleaned_data.get("upload")
        if upload is None:
            return None
        if upload.size > MAX_SOURCE_BYTES:
            raise forms.ValidationError(f"The file is {upload.size} bytes; the limit is {MAX_SOURCE_BYTES}.")
        try:
            return upload.read().decode("utf-8")
        except UnicodeDecodeError:
            raise forms.ValidationError("The file is not UTF-8 text.") from None

    def the_source(self) -> str:
        return self.cleaned_data.get("upload") or self.cleaned_data.get("source") or ""


def _starting_source(run: Run) -> tuple[str, str]:
    """(source, where it came from): the incumbent's, else the target's first seed, else empty."""
    if run.incumbent_id:
        return run.incumbent.source, f"the incumbent, candidate {run.incumbent.number}"
    seed = target_seed_source(run.thesis.target)
    if seed:
        return seed, f"the seed of {run.thesis.target.name}"
    return "", "nothing: no incumbent and no seed"


def _page(request, run, form, *, check=None, started_from="", status=200):
    return render(request, "console/runs/submit.html", {
        "run": run, "form": form, "check": check, "started_from": started_from,
        "accepting": run.status in (Run.Status.RUNNING, Run.Status.PAUSED),
    }, status=status)


def run_submit(request, pk):
    run = get_object_or_404(Run.objects.select_related("thesis__target", "incumbent"), pk=pk)
    check_permission(request.user, EDIT_THESIS)
    if request.method != "POST":
        source, started_from = _starting_source(run)
        return _page(request, run, SubmitForm(initial={"source": source}), started_from=started_from)

    form = SubmitForm(request.POST, request.FILES)
    if not form.is_valid():
        return _page(request, run, form, status=400)
    source = form.the_source()
    # What the editor shows next is what was checked, also when it came from a file.
    shown = SubmitForm(initial={"source": source, "note": form.cleaned_data["note"]})
    check = source_check(source, run.thesis.target)
    if request.POST.get("action") != "submit":
        return _page(request, run, shown, check=check)
    if not check["ok"]:
        return _page(request, run, shown, check=check, status=400)
    try:
        candidate = candidate_submit_human(run=run, actor=request.user, source=source, note=form.cleaned_data["note"])
    except CandidateRejected as error:
        check = {**check, "ok": False, "problems": error.problems}
        return _page(request, run, shown, check=check, status=400)
    messages.success(request, f"Candidate {candidate.number} submitted; it is queued when a {run.hardware} "
                              "worker is free.")
    return redirect("candidate", pk=candidate.pk)
