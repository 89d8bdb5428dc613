"""Theses: the team's backlog of hypotheses. Each write checks loop.edit_thesis and writes its Event."""

from django.core.exceptions import ValidationError
from django.db import transaction

from loop import roles
from loop.audit import event_write
from loop.models import Target, Thesis

EDITABLE = ("title", "body", "target", "hardware", "model", "constraints", "priority", "status")


def _clean(fields: dict) -> dict:
    errors = {}
    if "title" in fields and not (fields["title"] or "").strip():
        errors["title"] = "A thesis needs a title."
    if "body" in fields and not (fields["body"] or "").strip():
        errors["body"] = "Say what the diagnosis is and what to change."
    if "hardware" in fields and not (fields["hardware"] or "").strip():
        errors["hardware"] = "Name the hardware kind (h200, b200, cpu, ...)."
    if "status" in fields and fields["status"] not in Thesis.Status.values:
        errors["status"] = f"Status must be one of {', '.join(Thesis.Status.values)}."
    if "target" in fields and not isinstance(fields["target"], Target):
        errors["target"] = "Pick a target."
    if errors:
        raise ValidationError(errors)
    return {k: (v.strip() if isinstance(v, str) and k != "body" else v) for k, v in fields.items()}


def thesis_create(*, actor, title: str, body: str, target: Target, hardware: str, model: str = "",
                  constraints: str = "", priority: int = 0) -> Thesis:
    roles.check_permission(actor, roles.EDIT_THESIS)
    fields = _clean({"title": title, "body": body, "target": target, "hardware": hardware, "model": model,
                     "constraints": constraints, "priority": int(priority)})
    with transaction.atomic():
        thesis = Thesis.objects.create(owner=actor, **fields)
        event_write(type="thesis.created", actor=actor, subject=thesis, payload={
            "title": thesis.title, "target": target.name, "hardware": thesis.hardware, "priority": thesis.priority})
    return thesis


def thesis_edit(*, actor, thesis: Thesis, **changes) -> Thesis:
    """Change any of EDITABLE; an edit that changes nothing writes nothing."""
    roles.check_permission(actor, roles.EDIT_THESIS)
    unknown = set(changes) - set(EDITABLE)
    if unknown:
        raise ValueError(f"thesis_edit: not editable: {sorted(unknown)}")
    changes = _clean(changes)
    with transaction.atomic():
        current = Thesis.objects.select_for_update().get(pk=thesis.pk)
        changed = {k: v for k, v in changes.items() if getattr(current, k) != v}
        if not changed:
            return current
        Thesis.objects.filter(pk=current.pk).update(**changed)
        current.refresh_from_db()
        event_write(type="thesis.edited", actor=actor, subject=current, payload={
            "fields": sorted(changed),
            **{k: (v.name if isinstance(v, Target) else v) for k, v in changed.items() if k not in ("body", "constraints")},
        })
    return current


def thesis_prioritise(*, actor, thesis: Thesis, priority: int) -> Thesis:
    roles.check_permission(actor, roles.EDIT_THESIS)
    priority = int(priority)
    with transaction.atomic():
        old = Thesis.objects.select_for_update().values_list("priority", flat=True).get(pk=thesis.pk)
        if old == priority:
            return Thesis.objects.get(pk=thesis.pk)
        Thesis.objects.filter(pk=thesis.pk, priority=old).update(priority=priority)
        thesis = Thesis.objects.get(pk=thesis.pk)
        event_write(type="thesis.prioritised", actor=actor, subject=thesis, payload={"from": old, "to": priority})
    return thesis
