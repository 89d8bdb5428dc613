"""Skills in the database: imported from skills/*.md, edited as new revisions, exported back to files."""

from pathlib import Path

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max

from loop import roles, skillfiles
from loop.audit import event_write
from loop.models import SkillDoc, SkillRevision


def _latest_text(doc: SkillDoc) -> str | None:
    return doc.revisions.order_by("-number").values_list("text", flat=True).first()


def _append_revision(*, doc: SkillDoc, text: str, author, note: str) -> SkillRevision:
    number = (doc.revisions.aggregate(n=Max("number"))["n"] or 0) + 1
    return SkillRevision.objects.create(doc=doc, number=number, text=text, author=author, note=note[:200])


# A skill is context for a prompt and a page to read: past this it is several skills (docs/operations.md).
MAX_SKILL_BYTES = 256 * 1024


class SkillConflict(ValidationError):
    """Someone saved a newer revision since the editor was opened: neither text is written over."""

    def __init__(self, latest: SkillRevision, base: int):
        self.latest, self.base = latest, base
        who = latest.author.get_username() if latest.author else "an import"
        super().__init__(f"revision {latest.number} was saved by {who} after you opened revision {base}")


def size_problem(key: str, text: str) -> str | None:
    size = len(text.encode("utf-8"))
    if size <= MAX_SKILL_BYTES:
        return None
    return (f"{key}: this skill is {size / 1024:.0f} KB; the limit is {MAX_SKILL_BYTES // 1024} KB. Split it into "
            "smaller skills, one topic each, so each stays readable and fits in a prompt.")


def _check_text(key: str, text: str) -> None:
    problem = size_problem(key, text)
    if problem:
        raise ValidationError({"text": problem})
    try:
        skillfiles.validate_key(key)
        skillfiles.parse(key, text)
    except ValueError as error:
        raise ValidationError({"text": str(error)}) from error


def skill_edit(*, actor, key: str, text: str, note: str = "", base_revision: int | None = None) -> SkillRevision:
    """Save `text` as the next revision of `key` (creating the document); unchanged text adds nothing.
    `base_revision` is the revision the editor was opened from: if a later one exists with other text,
    SkillConflict is raised and nothing is written (the caller shows both versions)."""
    roles.check_permission(actor, roles.EDIT_THESIS)
    text = text.replace("\r\n", "\n")
    _check_text(key, text)
    with transaction.atomic():
        doc, created = SkillDoc.objects.get_or_create(key=key)
        doc = SkillDoc.objects.select_for_update().get(pk=doc.pk)
        latest = doc.revisions.order_by("-number").first()
        if latest is not None and latest.text == text:
            return latest
        if latest is not None and base_revision is not None and latest.number != base_revision:
            raise SkillConflict(latest, base_revision)
        revision = _append_revision(doc=doc, text=text, author=actor, note=note)
        event_write(type="skill.created" if created else "skill.edited", actor=actor, subject=doc,
                    payload={"key": key, "revision": revision.number, "note": revision.note})
    return revision


def skill_import_tree(*, actor, root: Path) -> dict:
    """Load every skill file under `root`; a file whose text differs from the latest revision becomes a new
    revision. All files are parsed before anything is written, so a bad file imports nothing."""
    roles.check_permission(actor, roles.EDIT_THESIS)
    try:
        files = skillfiles.load_tree(Path(root))
    except ValueError as error:
        raise ValidationError(str(error)) from error
    too_big = [problem for skill in files if (problem := size_problem(skill.key, skill.text))]
    if too_big:
        raise ValidationError(too_big)
    created, updated, unchanged = [], [], []
    with transaction.atomic():
        for skill in files:
            doc, is_new = SkillDoc.objects.get_or_create(key=skill.key)
            if not is_new and _latest_text(doc) == skill.text:
                unchanged.append(skill.key)
                continue
            _append_revision(doc=doc, text=skill.text, author=actor, note=f"imported from {Path(root).name}/")
            (created if is_new else updated).append(skill.key)
        event_write(type="skill.imported", actor=actor, payload={
            "root": str(root), "created": created, "updated": updated, "unchanged": len(unchanged)})
    return {"created": created, "updated": updated, "unchanged": unchanged}


def skill_export(*, actor, root: Path) -> list[Path]:
    """Write the latest revision of every skill under `root`, byte for byte."""
    roles.check_permission(actor, roles.EDIT_THESIS)
    items = []
    for doc in SkillDoc.objects.all():
        text = _latest_text(doc)
        if text is not None:
            items.append((doc.key, text))
    with transaction.atomic():
        written = skillfiles.export_tree(items, Path(root))
        event_write(type="skill.exported", actor=actor, payload={"root": str(root), "count": len(written)})
    return written
