"""Serving configs: promote a kept candidate for axis ranges, roll back to an older version.

Every promote or rollback makes a new immutable ServingConfig version whose `document` is the
exported JSON (`"schema": "ark.serving/1"`, validated before it is saved by gpu_worker.serving_config, the
parser the GPU side loads it with) and is written to SERVING_EXPORT_DIR/<target>/<hardware>/ after commit.
Promotion always needs a person with `loop.promote` who is not the candidate's author, nor the
run's creator when a person proposed the candidate (two people for every human change).

Routes are one-axis ranges ([lo, hi) of n_ctx) or boxes over the target's grid (loop/regions.py); once a
box is promoted the target's configs route boxes. A promote or rollback names the version it was
decided against (`based_on`): under a lock on the target row, a request whose version was superseded
by the very same change is told it is already done, and one superseded by another change is refused,
so two concurrent requests make one version (docs/domain.md, Range analysis and promotion).
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import tempfile
from pathlib import Path

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction

from gpu_worker.serving_config import ServingConfigError, parse_serving_config
from loop.audit import event_write
from loop.hardware import hardware_slug, path_inside
from loop.models import Candidate, Run, ServingConfig, Target
from loop.regions import analyze_candidate_grid, grid_axes, in_bounds, join_adjacent
from loop.roles import PROMOTE, check_permission
from loop.services.confirmations import confirmation_gate
from loop.services.fib import fib_promotion_export

log = logging.getLogger(__name__)

SCHEMA = "ark.serving/1"
DEFAULT = "default"


def _kernel_ref(candidate: Candidate) -> dict:
    return {"candidate_id": f"c{candidate.pk}", "source_hash": candidate.source_hash,
            "params": dict(candidate.params or {}), "source": candidate.source}


class NotConfirmed(ValidationError):
    """The candidate's GPU timings have no passing independent re-timing (loop/services/confirmations.py)."""


class AlreadyDone(ValidationError):
    """The same change was made by a request that came first: nothing new was made."""

    def __init__(self, message: str, config: ServingConfig):
        super().__init__(message)
        self.config = config


def _is_box(route) -> bool:
    return isinstance(route, dict) and "bounds" in route


def _as_box(route: dict, axes: tuple[str, ...], axis: str) -> dict:
    """A one-axis route as a box spanning every other axis."""
    if _is_box(route):
        return route
    bounds = {a: [0, None] for a in axes}
    bounds[axis] = [route["lo"], route["hi"]]
    return {"bounds": bounds, "kernel": route["kernel"]}


def _overlaps(a: dict, b: dict) -> bool:
    return all(a[x][0] < (b[x][1] if b[x][1] is not None else a[x][0] + 1)
               and b[x][0] < (a[x][1] if a[x][1] is not None else b[x][0] + 1) for x in a)


def _subtract(a: dict, b: dict) -> list[dict]:
    """Box a less box b, as up to two boxes per axis (slabs)."""
    if not _overlaps(a, b):
        return [a]
    pieces, rest = [], {x: list(v) for x, v in a.items()}
    for x in a:
        lo, hi = rest[x]
        if b[x][0] > lo:
            pieces.append({**rest, x: [lo, b[x][0]]})
            lo = b[x][0]
        if b[x][1] is not None and (hi is None or b[x][1] < hi):
            pieces.append({**rest, x: [b[x][1], hi]})
            hi = b[x][1]
        rest = {**rest, x: [lo, hi]}
    return pieces


def _box_overlay(current: list[dict], boxes: list[dict], kernel: dict, evidence: dict | None) -> list[dict]:
    """The candidate on `boxes` over the current box routes; the fallback serves the rest."""
    routes = []
    for route in current:
        if route["kernel"] == DEFAULT:
            continue
        pieces = [route["bounds"]]
        for box in boxes:
            pieces = [p for piece in pieces for p in _subtract(piece, box["bounds"])]
        routes += [{**route, "bounds": p} for p in pieces]
    for box in boxes:
        proof = evidence(box["bounds"]) if callable(evidence) else evidence
        routes.append({"bounds": box["bounds"], "kernel": kernel, **({"evidence": proof} if proof else {})})
    return sorted(routes, key=lambda r: [(v[0], -1 if v[1] is None else v[1]) for v in r["bounds"].values()])


def _segments(routes: list[dict]) -> list[tuple[int, int | None, object]]:
    return [(r["lo"], r["hi"], r["kernel"]) for r in routes]


def _overlay(base: list[tuple], lo: int, hi: int | None, kernel) -> list[tuple]:
    """Put `kernel` on [lo, hi) over a cover of [0, inf); cut what it overlaps."""
    out = []
    for a, b, k in base:
        if b is not None and b <= lo or hi is not None and a >= hi:
            out.append((a, b, k))
            continue
        if a < lo:
            out.append((a, lo, k))
        if hi is not None and (b is None or b > hi):
            out.append((hi, b, k))
    out.append((lo, hi, kernel))
    return sorted(out, key=lambda s: s[0])


def _merge(segments: list[tuple]) -> list[dict]:
    return [{"lo": a, "hi": b, "kernel": k} for a, b, k in join_adjacent(segments)]


def normalise_routes(routes) -> list[tuple[int, int | None]]:
    """The candidate's ranges from a route set: [{"lo", "hi", "kernel": "candidate" | "default"}], or
    [(lo, hi)]. Half-open, sorted, non-overlapping, lo >= 0."""
    ranges = []
    for route in routes or []:
        if isinstance(route, dict):
            if route.get("kernel", "candidate") == DEFAULT:
                continue
            lo, hi = route.get("lo"), route.get("hi")
        else:
            lo, hi = route
        if not isinstance(lo, int) or isinstance(lo, bool) or lo < 0:
            raise ValidationError(f"route lo must be an integer >= 0, got {lo!r}")
        if hi is not None and (not isinstance(hi, int) or isinstance(hi, bool) or hi <= lo):
            raise ValidationError(f"route hi must be empty (unbounded) or an integer above {lo}, got {hi!r}")
        ranges.append((lo, hi))
    ranges.sort()
    for (_, a_hi), (b_lo, _) in itertools.pairwise(ranges):
        if a_hi is None or b_lo < a_hi:
            raise ValidationError(f"routes overlap at {b_lo}")
    if not ranges:
        raise ValidationError("a promotion needs at least one range for the candidate")
    return ranges


def _axis(target: Target) -> str:
    return "n_ctx" if "n_ctx" in (target.axes or {}) else next(iter(target.axes or {"n_ctx": None}))


def _latest(target: Target, hardware: str) -> ServingConfig | None:
    return ServingConfig.objects.filter(target=target, hardware=hardware).order_by("-version").first()


def _document(*, target: Target, hardware: str, version: int, axis: str, routes: list[dict]) -> dict:
    return {"schema": SCHEMA, "target": target.name, "hardware": hardware, "version": version, "axis": axis,
            "routes": routes, "fallback": DEFAULT}


def _validate(document: dict) -> None:
    try:
        parse_serving_config(document, target=document["target"])
    except ServingConfigError as exc:
        raise ValidationError(exc.problems) from exc


def deployment_promote(*, actor, candidate: Candidate, routes, note: str = "", based_on: int | None = None,
                       evidence=None) -> ServingConfig:
    """A new serving-config version: the candidate on `routes`, everything else as before. `based_on`:
    the version in force when the person decided (0: none); see the module docstring."""
    check_permission(actor, PROMOTE)
    candidate = Candidate.objects.select_related("run__thesis__target", "run__created_by", "author").get(pk=candidate.pk)
    run = candidate.run
    if candidate.author_id is not None and candidate.author_id == actor.pk:
        raise PermissionDenied("the candidate's author may not promote it")
    if candidate.proposer == Run.Proposer.HUMAN and run.created_by_id == actor.pk:
        raise PermissionDenied("the run's creator may not promote a candidate a person proposed in it")
    if candidate.status != Candidate.Status.KEPT:
        raise ValidationError(f"only a kept candidate can be promoted; this one is {candidate.status}")
    allowed, why = confirmation_gate(candidate)  # an independent re-timing first (docs/keep-rule.md)
    if not allowed:
        raise NotConfirmed(f"an independent re-timing must confirm its GPU timings first ({why}); use "
                           "“Re-time now” on the candidate page")
    boxes = [r for r in routes or [] if _is_box(r) and r.get("kernel", "candidate") != DEFAULT]
    ranges = normalise_routes(routes) if not boxes else [(r["bounds"], None) for r in boxes]
    target, hardware = run.thesis.target, run.hardware
    kernel = _kernel_ref(candidate)
    evidence = evidence if evidence is not None else _evidence(candidate)
    with transaction.atomic():
        Target.objects.select_for_update().get(pk=target.pk)  # one promote or rollback per target at a time
        latest = _latest(target, hardware)
        grid = tuple(latest.document["axes"]) if latest and "axes" in latest.document else None
        if boxes or grid:
            grid = grid or grid_axes(target) or tuple(boxes[0]["bounds"])
            axis_1d = latest.axis if latest and not latest.document.get("axes") else _axis(target)
            current = [_as_box(r, grid, axis_1d) for r in (latest.routes if latest else [])]
            wanted = boxes or [_as_box({"lo": lo, "hi": hi, "kernel": "candidate"}, grid, axis_1d) for lo, hi in ranges]
            new_routes, axis = _box_overlay(current, wanted, kernel, evidence), " x ".join(grid)
        else:
            axis = latest.axis if latest else _axis(target)
            segments = _segments(latest.routes) if latest else [(0, None, DEFAULT)]
            for lo, hi in ranges:
                segments = _overlay(segments, lo, hi, kernel)
            new_routes = _merge(segments)
        _check_based_on(latest, based_on, new_routes)
        version = (latest.version if latest else 0) + 1
        document = _document(target=target, hardware=hardware, version=version, axis=axis, routes=new_routes)
        if grid:
            document.pop("axis")
            document["axes"] = list(grid)
        _validate(document)
        config = _create(target=target, hardware=hardware, version=version, axis=axis, routes=new_routes,
                         document=document, note=note, author=candidate.author or run.created_by, approver=actor)
        event_write(type="serving.promoted", actor=actor, subject=config, run_id=run.pk, payload={
            "target": target.name, "hardware": hardware, "version": version, "candidate": candidate.pk,
            "number": candidate.number, "ranges": [list(r) if not boxes else r[0] for r in ranges], "note": note,
            "based_on": based_on, "retiming": why})
        transaction.on_commit(lambda: serving_export(config=config))
    return config


def _evidence(candidate: Candidate):
    """Per box: the candidate's won cells inside it, with speedup over the default and its interval, and
    the evaluation they come from (what the dispatcher's explain shows). None when it has no grid."""
    grid = analyze_candidate_grid(candidate, baseline="default")
    evaluation = candidate.evaluations.order_by("-attempt").first()
    if grid is None or evaluation is None:
        return None

    def for_box(bounds: dict) -> dict:
        cells = [{"shape": shape, "speedup": round(c.speedup, 4), "ci95": [round(1 / c.ci95[1], 4), round(1 / c.ci95[0], 4)]}
                 for c in grid.won if in_bounds(bounds, shape := {grid.axes[0]: c.row, grid.axes[1]: c.col})]
        return {"candidate": candidate.pk, "evaluation": evaluation.pk, "baseline": "default", "cells": cells}

    return for_box


def _check_based_on(latest: ServingConfig | None, based_on: int | None, new_routes) -> None:
    """Refuse a request decided against a version that is no longer the one in force."""
    if based_on is None:
        return
    current = latest.version if latest else 0
    if based_on == current:
        return
    if latest is not None and _strip(latest.routes) == _strip(new_routes):
        raise AlreadyDone(f"Already done: v{latest.version} (by {latest.approver.username}) serves exactly these "
                          "routes; nothing new was made.", latest)
    raise ValidationError(f"The serving config changed since you looked: v{current} is in force now, not "
                          f"v{based_on}. Review its effect again before promoting.")


def _strip(routes) -> list:
    """Routes without their evidence (the same change decided twice carries the same boxes and kernels)."""
    return [{k: v for k, v in r.items() if k != "evidence"} for r in routes or []]


def _create(**fields) -> ServingConfig:
    """Insert the version; the unique (target, hardware, version) constraint is the last guard."""
    try:
        with transaction.atomic():
            return ServingConfig.objects.create(**fields)
    except IntegrityError:
        raise ValidationError(f"v{fields['version']} was made by another request a moment ago; reload the page.") from None


def deployment_rollback(*, actor, target: Target, hardware: str, to_version: int, note: str = "",
                        based_on: int | None = None) -> ServingConfig:
    """A new version whose routes equal those of `to_version`."""
    check_permission(actor, PROMOTE)
    with transaction.atomic():
        Target.objects.select_for_update().get(pk=target.pk)
        old = ServingConfig.objects.filter(target=target, hardware=hardware, version=to_version).first()
        if old is None:
            raise ValidationError(f"{target.name} on {hardware} has no serving config version {to_version}")
        latest = _latest(target, hardware)
        if based_on is not None and based_on != latest.version and latest.rolled_back_to == to_version:
            raise AlreadyDone(f"Already done: v{latest.version} rolled back to v{to_version}.", latest)
        if latest.version == to_version:
            raise ValidationError(f"version {to_version} is already the current one")
        if based_on is not None and based_on != latest.version:
            raise ValidationError(f"The serving config changed since you looked: v{latest.version} is in force now.")
        version = latest.version + 1
        document = {**old.document, "version": version}
        _validate(document)
        config = _create(
            target=target, hardware=hardware, version=version, axis=old.axis, routes=old.routes, document=document,
            note=note, rolled_back_to=to_version, author=actor, approver=actor)
        event_write(type="serving.rolled_back", actor=actor, subject=config, payload={
            "target": target.name, "hardware": hardware, "version": version, "to_version": to_version,
            "from_version": latest.version, "note": note})
        transaction.on_commit(lambda: serving_export(config=config))
    return config


def export_path(target_name: str, hardware: str, version: int | None = None) -> Path:
    """SERVING_EXPORT_DIR/<target>/<hardware>/<file>: the hardware a slug, the whole checked to stay inside
    the export directory (docs/security.md)."""
    name = "current.json" if version is None else f"v{int(version)}.json"
    try:
        hardware = hardware_slug(hardware)
    except ValidationError as error:
        raise ValueError(f"refused export path: {' '.join(error.messages)}") from None
    return path_inside(Path(settings.SERVING_EXPORT_DIR), target_name, hardware, name)


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


def serving_export(*, config: ServingConfig) -> Path:
    """Write the version's document, and current.json when it is the latest. Rerunnable."""
    text = json.dumps(config.document, indent=2, sort_keys=True) + "\n"
    path = export_path(config.target.name, config.hardware, config.version)
    _write_atomic(path, text)
    latest = _latest(config.target, config.hardware)
    if latest is not None and latest.pk == config.pk:
        _write_atomic(export_path(config.target.name, config.hardware), text)
    if config.target.document:  # an imported target: the TraceSet flashinfer_bench.apply serves (docs/interop.md)
        try:
            fib_promotion_export(config=config)
        except ValidationError:
            log.exception("the FlashInfer-Bench TraceSet of %s v%s was not written", config.target.name, config.version)
    return path
