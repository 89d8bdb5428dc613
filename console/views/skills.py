"""Skills: the tree of hardware and model skills, view, edit with preview, history with diffs, export."""

import hashlib
import io
import zipfile
from pathlib import Path

from django.conf import settings
from django.contrib import messages
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST

from console.diffs import render_diff, unified_diff
from console.forms import SkillEditForm, SkillNewForm
from console.markdown import render_markdown
from console.views.common import apply_validation_error, error_text
from loop import selectors, skillfiles
from loop.models import SkillDoc
from loop.services import skills as skill_services
from loop.services.access import export_record


def _split(text: str, key: str = "preview.md") -> tuple[dict, str]:
    """Front matter and body for display; text that does not parse is shown whole."""
    try:
        skill = skillfiles.parse(key, text)
    except ValueError:
        return {}, text
    return skill.meta, skill.body


def skill_tree(request):
    return render(request, "console/skills/tree.html", {
        "tree": selectors.skill_tree(), "export_root": settings.ARK_EXPORT_DIR,
        "export_folder": f"skills-{timezone.localdate():%Y-%m-%d}"})


def skill_detail(request, key):
    doc = get_object_or_404(SkillDoc, key=key)
    revision = selectors.skill_latest(doc)
    if revision is None:
        raise Http404("no revision")
    meta, body = _split(revision.text, doc.key)
    # A revision never changes: its rendering is kept (per process) for the next view, keyed by its text's digest
    # as well as its id (an id can be used again after a delete, and is in every test's fresh database).
    digest = hashlib.blake2b(body.encode(), digest_size=16).hexdigest()
    body_html = cache.get_or_set(f"ark:skill-html:{revision.pk}:{digest}", lambda: render_markdown(body), timeout=3600)
    return render(request, "console/skills/detail.html", {
        "doc": doc, "revision": revision, "meta": meta, "body_html": mark_safe(body_html),  # nh3 output, kept as is
        "revision_count": doc.revisions.count(),
    })


def _base_revision(request, latest) -> int | None:
    """The revision the editor was opened from (a hidden field); a GET opens the latest."""
    if request.method != "POST":
        return latest.number if latest else None
    try:
        return int(request.POST.get("base_revision", ""))
    except ValueError:
        return None


def skill_edit(request, key):
    doc = get_object_or_404(SkillDoc, key=key)
    latest = selectors.skill_latest(doc)
    form = SkillEditForm(request.POST or None, initial={"text": latest.text if latest else ""})
    base = _base_revision(request, latest)
    conflict = None
    if request.method == "POST" and form.is_valid():
        try:
            revision = skill_services.skill_edit(actor=request.user, key=doc.key, base_revision=base,
                                                 **form.cleaned_data)
        except skill_services.SkillConflict as error:
            conflict = _conflict(doc, error.latest, base, form.cleaned_data["text"])
            base = error.latest.number  # the next save is made knowing both versions
        except ValidationError as error:
            apply_validation_error(form, error)
        else:
            if latest is not None and revision.pk == latest.pk:
                messages.info(request, f"Nothing changed: revision {revision.number} stays the latest.")
            else:
                messages.success(request, f"Saved as revision {revision.number}.")
            return redirect("skill", key=doc.key)
    status = 409 if conflict else 400 if form.errors else 200
    return render(request, "console/skills/form.html", {
        "form": form, "doc": doc, "latest": latest, "base_revision": base, "conflict": conflict,
        "max_kb": skill_services.MAX_SKILL_BYTES // 1024}, status=status)


def _conflict(doc, theirs, base: int | None, yours: str) -> dict:
    """Both versions, side by side, and what yours changes against theirs: nothing is lost."""
    return {"theirs": theirs, "base": base, "yours": yours,
            "diff_html": render_diff(unified_diff(theirs.text, yours.replace("\r\n", "\n"),
                                                  old_name=f"{doc.key}@{theirs.number}", new_name="yours"))}


def skill_new(request):
    form = SkillNewForm(request.POST or None, initial={"text": (
        "---\ntitle: \nkind: hardware\napplies_to: {hardware: [h200], models: [any], targets: [any]}\n"
        "sources: [\"\"]\n---\n\n")})
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        if SkillDoc.objects.filter(key=data["key"]).exists():
            form.add_error("key", "A skill with this key exists; edit it instead.")
        else:
            try:
                skill_services.skill_edit(actor=request.user, key=data["key"], text=data["text"], note=data["note"])
            except ValidationError as error:
                apply_validation_error(form, error)
            else:
                messages.success(request, "Skill created.")
                return redirect("skill", key=data["key"])
    return render(request, "console/skills/form.html", {"form": form, "doc": None},
                  status=400 if form.errors else 200)


@require_POST
def skill_preview(request):
    _, body = _split(request.POST.get("text", ""))
    return render(request, "console/_preview.html", {"html": render_markdown(body)})


def skill_history(request, key):
    doc = get_object_or_404(SkillDoc, key=key)
    revisions = selectors.skill_revisions(doc)
    numbers = [r.number for r in revisions]
    diff_html, a, b = None, None, None
    if len(revisions) >= 2 or request.GET.get("a"):
        try:
            a = int(request.GET.get("a") or numbers[1])
            b = int(request.GET.get("b") or numbers[0])
        except ValueError:
            raise Http404("bad revision number") from None
        by_number = {r.number: r for r in revisions}
        if a not in by_number or b not in by_number:
            raise Http404("no such revision")
        diff_html = render_diff(unified_diff(by_number[a].text, by_number[b].text,
                                             old_name=f"{doc.key}@{a}", new_name=f"{doc.key}@{b}"))
    return render(request, "console/skills/history.html", {
        "doc": doc, "revisions": revisions, "diff_html": diff_html, "a": a, "b": b})


def skill_download(request):
    """Every skill's latest revision as a zip of skills/<key> files."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for key, text in selectors.skill_texts():
            skillfiles.validate_key(key)
            archive.writestr(f"skills/{key}", text.encode("utf-8"))
    export_record(actor=request.user, what="skills.zip")
    response = HttpResponse(buffer.getvalue(), content_type="application/zip")
    response["Content-Disposition"] = 'attachment; filename="ark-skills.zip"'
    return response


def _export_folder(request) -> Path:
    """The folder to export into: one the user names under settings.ARK_EXPORT_DIR (outside the checkout by
    default), never a path that leaves it or lands in the git tree."""
    name = (request.POST.get("folder") or "").strip() or f"skills-{timezone.localdate():%Y-%m-%d}"
    relative = skillfiles.validate_key(name)  # ValueError: absolute, '..', backslashes
    root = Path(settings.ARK_EXPORT_DIR).joinpath(*relative.parts)
    if root.resolve().is_relative_to(Path(settings.BASE_DIR).resolve()):
        raise ValueError(f"{root} is inside the ark checkout; set ARK_EXPORT_DIR to a folder outside it "
                         "(or use Download (zip))")
    return root


@require_POST
def skill_export(request):
    try:
        root = _export_folder(request)
        written = skill_services.skill_export(actor=request.user, root=root)
    except (ValidationError, ValueError) as error:
        messages.error(request, f"Export refused, nothing written: {error_text(error)}")
    else:
        messages.success(request, f"Wrote {len(written)} skill files under {root}.")
    return redirect("skills")


@require_POST
def skill_import(request):
    root = settings.SKILLS_DIR
    try:
        result = skill_services.skill_import_tree(actor=request.user, root=root)
    except ValidationError as error:
        messages.error(request, f"Import refused, nothing changed: {error_text(error)}")
    else:
        messages.success(request, f"Imported from {root}: {len(result['created'])} new, "
                                  f"{len(result['updated'])} updated, {len(result['unchanged'])} unchanged.")
    return redirect("skills")
