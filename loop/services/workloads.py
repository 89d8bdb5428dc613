"""Workload profiles: how often each cell of a target's operating grid is served (docs/domain.md).

A profile is set whole (imported from a serving log, the e2e grid, or edited in the console); the
promotion impact, the waterfall and the backlog read shares from it with `workload_shares`.
"""

from __future__ import annotations

import math

from django.core.exceptions import ValidationError
from django.db import transaction

from loop.audit import event_write
from loop.models import Target, WorkloadProfile


def _target(target) -> Target:
    if isinstance(target, Target):
        return target
    found = Target.objects.filter(name=target).first()
    if found is None:
        raise ValidationError(f"no target named {target!r}")
    return found


def _clean_cells(target: Target, cells) -> list[dict]:
    axes = set(target.axes or {})
    merged: dict[tuple, float] = {}
    problems = []
    for i, item in enumerate(cells or []):
        try:
            shape, weight = item
        except (TypeError, ValueError):
            problems.append(f"cell {i}: expected (shape, weight), got {item!r}")
            continue
        if not isinstance(shape, dict) or not shape:
            problems.append(f"cell {i}: the shape must be a non-empty mapping of axis to value")
            continue
        unknown = sorted(set(shape) - axes) if axes else []
        if unknown:
            problems.append(f"cell {i}: {target.name} has no axis {', '.join(unknown)} (its axes: {', '.join(sorted(axes))})")
            continue
        if any(not isinstance(v, int) or isinstance(v, bool) or v < 0 for v in shape.values()):
            problems.append(f"cell {i}: axis values must be integers >= 0, got {shape!r}")
            continue
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight < 0:
            problems.append(f"cell {i}: the weight must be a finite number >= 0, got {weight!r}")
            continue
        key = tuple(sorted(shape.items()))
        merged[key] = merged.get(key, 0.0) + float(weight)
    if problems:
        raise ValidationError(problems)
    if not merged or sum(merged.values()) <= 0:
        raise ValidationError("a workload profile needs at least one cell with a weight above 0")
    return [{"shape": dict(key), "weight": weight} for key, weight in sorted(merged.items())]


def workload_profile_set(target, cells: list[tuple[dict, float]], *, actor="system", source: str = "") -> WorkloadProfile:
    """Replace the target's workload profile with `cells`: [(shape {axis: value}, weight)]. Weights are
    in any unit (calls, seconds); repeated shapes add up. Raises ValidationError naming each bad cell."""
    target = _target(target)
    clean = _clean_cells(target, cells)
    with transaction.atomic():
        profile, _ = WorkloadProfile.objects.select_for_update().get_or_create(target=target)
        profile.cells, profile.source = clean, source[:200]
        profile.save()
        event_write(type="workload.set", actor=actor, subject=profile,
                    payload={"target": target.name, "cells": len(clean), "source": source,
                             "total_weight": sum(c["weight"] for c in clean)})
    return profile


def workload_shares(target) -> dict[tuple, float] | None:
    """{sorted shape items: share of all calls} for the target's profile; None when it has none."""
    profile = WorkloadProfile.objects.filter(target=_target(target)).first()
    if profile is None or not profile.cells:
        return None
    total = sum(c["weight"] for c in profile.cells) or 1.0
    return {tuple(sorted(c["shape"].items())): c["weight"] / total for c in profile.cells}
