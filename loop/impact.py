"""What a promotion changes against the serving config in force now, weighted by the workload profile,
and the tokens/s waterfall of a target's serving-config versions (docs/domain.md, Range analysis and promotion).

Every number here is read from measured reports; where a comparison was never measured it says so
("not measured") instead of guessing.
"""

from __future__ import annotations

from gpu_worker.serving_config import ServingConfigError, parse_serving_config
from loop.models import Candidate, Evaluation, ServingConfig, Target
from loop.regions import CANDIDATE, E2E_AXES, GridAnalysis
from loop.services.workloads import workload_shares

DEFAULT = "default"


def _table(config: ServingConfig | None):
    if config is None:
        return None
    try:
        return parse_serving_config(config.document)
    except ServingConfigError:
        return None


def serving_owner(table, shape: dict) -> str:
    """"default" or the candidate id ("c42") serving `shape` under a parsed config (None: no config)."""
    if table is None:
        return DEFAULT
    _, route = table.route_for(shape)
    return DEFAULT if route is None or route.kernel is None else route.kernel.candidate_id


def _latest_report(candidate_id: str) -> dict | None:
    if not candidate_id.startswith("c") or not candidate_id[1:].isdigit():
        return None
    evaluation = Evaluation.objects.filter(candidate_id=int(candidate_id[1:])).order_by("-attempt").first()
    return evaluation.report if evaluation else None


def _cell_times(report: dict | None, axes: tuple[str, str]) -> dict:
    """(row, col) -> {"candidate", "incumbent", "default"} mean microseconds, averaged over the cell's shapes."""
    sums: dict = {}
    for shape in ((report or {}).get("stages") or {}).get("benchmark", {}).get("shapes") or []:
        dims = shape.get("shape") or {}
        if shape.get("held_out") or any(a not in dims for a in axes):
            continue
        entry = sums.setdefault((dims[axes[0]], dims[axes[1]]), {"candidate": [], "incumbent": [], "default": []})
        for name in ("candidate", "incumbent"):
            timing = shape.get(name) or {}
            if isinstance(timing.get("mean_us"), (int, float)):
                entry[name].append(timing["mean_us"])
        if isinstance(shape.get("default_mean_us"), (int, float)):
            entry["default"].append(shape["default_mean_us"])
    return {k: {n: (sum(v) / len(v) if v else None) for n, v in e.items()} for k, e in sums.items()}


def promotion_impact(candidate: Candidate, grid: GridAnalysis, current: ServingConfig | None) -> dict:
    """Per measured cell: who serves it now, who would, and the time ratio new / now where measured;
    and the whole change weighted by the target's workload profile (equal weights without one)."""
    axes, run = grid.axes, candidate.run
    table = _table(current)
    report = candidate.evaluations.order_by("-attempt").values_list("report", flat=True).first()
    mine, incumbent = f"c{candidate.pk}", (f"c{run.incumbent_id}" if run.incumbent_id else None)
    times, others = _cell_times(report, axes), {}
    cells = []
    for (row, col), cell in sorted(grid.cells.items()):
        shape = {axes[0]: row, axes[1]: col}
        now = serving_owner(table, shape)
        new = mine if grid.owner(shape) == CANDIDATE else now
        t = times.get((row, col), {})
        ratio, basis = (1.0, "unchanged") if new == now else (None, "not measured")
        if new != now and t.get("candidate"):
            if now == DEFAULT and t.get("default"):
                ratio, basis = t["candidate"] / t["default"], "measured against the default"
            elif now == incumbent and t.get("incumbent"):
                ratio, basis = t["candidate"] / t["incumbent"], "measured against the incumbent"
            elif now not in (DEFAULT, mine):
                if now not in others:
                    others[now] = _cell_times(_latest_report(now), axes)
                theirs = others[now].get((row, col), {}).get("candidate")
                if theirs:
                    ratio, basis = t["candidate"] / theirs, f"from separate reports (this one and {now}'s)"
        cells.append({"shape": shape, "now": now, "new": new, "changes": new != now, "ratio": ratio, "basis": basis})
    return {"cells": cells, "current_version": current.version if current else None,
            **_weighted(cells, workload_shares(run.thesis.target), axes)}


def _weighted(cells: list[dict], shares: dict | None, axes) -> dict:
    weights = {}
    for cell in cells:
        key = tuple(sorted(cell["shape"].items()))
        weights[key] = shares.get(key, 0.0) if shares else 1.0 / len(cells)
    changing = [c for c in cells if c["changes"]]
    known = [c for c in changing if c["ratio"] is not None]
    w = lambda c: weights[tuple(sorted(c["shape"].items()))]
    covered = sum(weights.values())
    changed_share = sum(w(c) for c in changing)
    unknown_share = sum(w(c) for c in changing if c["ratio"] is None)
    # time per call after / before over the cells measured: unchanged cells count 1
    after = sum(w(c) * (c["ratio"] if c["ratio"] is not None else 1.0) for c in cells)
    return {"weighted_by": "workload profile" if shares else "equal weights (no workload profile)",
            "profile_share_on_grid": covered if shares else None, "changed_share": changed_share,
            "unmeasured_share": unknown_share,
            "time_ratio": (after / covered) if covered and known else None}


# --- the waterfall --------------------------------------------------------------------------------------

def _point_ratio(report: dict | None, batch, context) -> float | None:
    """tokens/s with the candidate / with the default at an e2e point, from one interleaved measurement."""
    for point in ((report or {}).get("stages") or {}).get("e2e", {}).get("points") or []:
        if point.get("batch") == batch and point.get("context") == context:
            cand, base = point.get("candidate_tok_s"), point.get("default_tok_s")
            return cand / base if cand and base else None
    return None


def serving_waterfall(target, hardware: str) -> dict:
    """Each version's step: its tokens/s over the e2e grid minus the version's before it, where every
    point's serving kernel was measured end to end (else "not measured"). Weighted by the workload
    profile where it covers the grid's points, equally otherwise. Identical routes give a step of 0; a
    rollback that takes a gain back shows as a step down."""
    versions = list(ServingConfig.objects.filter(target=target, hardware=hardware).order_by("version"))
    reports = {}
    grid_points: dict = {}
    for config in versions:
        for route in config.routes or []:
            kernel = route.get("kernel")
            if isinstance(kernel, dict) and kernel.get("candidate_id") not in reports:
                cid = kernel["candidate_id"]
                reports[cid] = _latest_report(cid)
                for point in ((reports[cid] or {}).get("stages") or {}).get("e2e", {}).get("points") or []:
                    if point.get("default_tok_s"):
                        grid_points.setdefault((point["batch"], point["context"]), []).append(point["default_tok_s"])
    mapping = E2E_AXES.get(target.name, {})
    shares = workload_shares(target)
    points = sorted(grid_points)
    base_tok = {p: sum(v) / len(v) for p, v in grid_points.items()}

    def weight(p):
        shape = {mapping[k]: v for k, v in zip(("batch", "context"), p) if k in mapping}
        return shares.get(tuple(sorted(shape.items())), 0.0) if shares else 1.0

    total_w = sum(weight(p) for p in points) or None
    weights = {p: (weight(p) / total_w if total_w else 1.0 / len(points)) for p in points}
    base = sum(weights[p] * base_tok[p] for p in points) if points else None

    def level(config) -> float | None:
        table, total = _table(config), 0.0
        for p in points:
            shape = {mapping[k]: v for k, v in zip(("batch", "context"), p) if k in mapping}
            owner = serving_owner(table, shape)
            ratio = 1.0 if owner == DEFAULT else _point_ratio(reports.get(owner), *p)
            if ratio is None:
                return None
            total += weights[p] * base_tok[p] * ratio
        return total

    steps, previous = [], base
    for config in versions:
        now = level(config) if points else None
        gain = (now - previous) if now is not None and previous is not None else None
        steps.append({"version": config.version, "gain": gain, "level": now, "rolled_back_to": config.rolled_back_to,
                      "measured": gain is not None})
        previous = now
    ceilings = {}
    for report in reports.values():
        for point in ((report or {}).get("stages") or {}).get("e2e", {}).get("points") or []:
            if isinstance(point, dict) and point.get("ceiling_tok_s") and (point.get("batch"), point.get("context")) in weights:
                ceilings.setdefault((point["batch"], point["context"]), point["ceiling_tok_s"])
    ceiling = sum(weights[p] * ceilings[p] for p in points) if points and len(ceilings) == len(points) else None
    return {"base": base, "steps": steps, "points": [list(p) for p in points],
            "weighted_by": "workload profile" if shares and total_w else "equal weights (no workload profile)",
            "ceiling": ceiling}


# --- the backlog ----------------------------------------------------------------------------------------

def _kernel_share(report: dict | None) -> float | None:
    """The kernel's share of a decode step, 1 - tokens/s with the default / tokens/s were it free, averaged
    over the e2e points that measured a zero-cost run (`ceiling_tok_s`); None when none did."""
    shares = [1.0 - p["default_tok_s"] / p["ceiling_tok_s"]
              for p in ((report or {}).get("stages") or {}).get("e2e", {}).get("points") or []
              if isinstance(p, dict) and p.get("default_tok_s") and p.get("ceiling_tok_s")]
    return sum(shares) / len(shares) if shares else None


def target_backlog() -> list[dict]:
    """Targets ranked by what is left to gain (Amdahl): the kernel's share of the step times its distance
    to the ceiling (1 - the best kept kernel's fraction of the roofline floor). What no report measured is
    None, and a target with an unknown product ranks after every known one."""
    rows = []
    for target in Target.objects.order_by("name"):
        kept = (Evaluation.objects.filter(candidate__run__thesis__target=target, candidate__status=Candidate.Status.KEPT)
                .order_by("-id").values_list("report", flat=True))
        fractions = [f for r in kept if isinstance(f := ((r or {}).get("summary") or {}).get("floor_fraction"), (int, float))]
        shares = [s for r in kept if (s := _kernel_share(r)) is not None]
        share = shares[0] if shares else None
        distance = (1.0 - max(fractions)) if fractions else None
        rows.append({"target": target, "share": share, "distance": distance, "kept": len(kept),
                     "left": share * distance if share is not None and distance is not None else None})
    return sorted(rows, key=lambda r: (r["left"] is None, -(r["left"] or 0.0), r["distance"] is None,
                                       -(r["distance"] or 0.0), r["target"].name))
