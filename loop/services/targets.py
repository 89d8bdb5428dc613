"""Mirror gpu_worker's target catalog into Target rows (name, range, DSLs, version)."""

from django.db import transaction

from gpu_worker.fib.document import target_info
from gpu_worker.target_catalog import CATALOG
from loop.audit import event_write
from loop.models import Target


def target_sync(*, actor="system") -> list[Target]:
    """Create or update one Target row per catalogued target; an Event for each one that changed."""
    synced = []
    for name, info in sorted(CATALOG.items()):
        fields = {
            "version": str(info.version), "description": info.description,
            "axes": {axis: list(bounds) for axis, bounds in info.axes.items()}, "dsls": list(info.dsls),
            "e2e_slot": info.e2e_slot or "",
        }
        with transaction.atomic():
            target = Target.objects.select_for_update().filter(name=name).first()
            if target is None:
                target = Target.objects.create(name=name, **fields)
                event_write(type="target.added", actor=actor, subject=target, payload={"name": name, **fields})
            elif any(getattr(target, k) != v for k, v in fields.items()):
                Target.objects.filter(pk=target.pk).update(**fields)
                target.refresh_from_db()
                event_write(type="target.updated", actor=actor, subject=target, payload={"name": name, **fields})
        synced.append(target)
    return synced


def target_contract(target: Target) -> dict:
    """What a candidate for this target must do (for prompts): the catalog's description when known."""
    info = CATALOG.get(target.name) or (target_info(target.document) if target.document else None)
    if info is None:
        return {"name": target.name, "description": target.description, "axes": target.axes, "dsls": target.dsls}
    contract = info.describe()
    if target.document:  # an imported target: the proposer sees the definition itself (docs/interop.md)
        contract["flashinfer_bench_definition"] = target.document["definition"]
    return contract


def target_seed_source(target: Target) -> str | None:
    """The text of the target's first seed candidate, or None."""
    info = CATALOG.get(target.name)
    paths = info.seed_paths() if info is not None else []
    return paths[0].read_text(encoding="utf-8") if paths and paths[0].is_file() else None
