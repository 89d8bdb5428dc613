"""Range analysis: where along one workload axis a candidate wins, where it crosses over, and the
routes (half-open ranges of that axis) that send it only its winning ranges and the rest to the
default kernel.

Input is per-shape benchmark results and per-grid-point e2e results with their intervals, as in a
report (`ark.report/1`). A value of the axis is:
  win  - every benchmark shape there is faster beyond noise by the policy's one rule
         (`loop.policy.judge`, docs/keep-rule.md), or an e2e point there is faster beyond noise by
         the same rule, and nothing there loses;
  lose - some shape there is slower (ratio >= 1), or an e2e point there is worse than noise, or
         (a value the e2e grid did not measure) the e2e grid lost at its largest context below it
         with nothing measured above, or at both neighbouring contexts;
  tie  - anything else (within noise).
A route boundary between a winning value a and a non-winning neighbour b sits at the crossover:
where the ratio, interpolated linearly in log(axis), crosses 1; clamped so that b itself is never
routed to the candidate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from loop.policy import (
    FASTER,
    SLOWER_BEYOND_NOISE,
    RunPolicy,
    _interval,
    _number,
    aa_interval,
    e2e_judgement,
    finite,
    judge,
    noise_floor,
)

WIN, LOSE, TIE = "win", "lose", "tie"
DEFAULT = "default"
CANDIDATE = "candidate"
# An e2e grid point's context length is the serving axis it lies on.
E2E_AXIS_OF = {"n_ctx": "context"}


@dataclass(frozen=True)
class AxisPoint:
    value: int
    status: str
    ratio: float | None  # candidate / baseline time, the worst shape at this value
    ci95: tuple[float, float] | None
    sources: tuple[str, ...] = ()


@dataclass(frozen=True)
class RangeAnalysis:
    axis: str
    points: tuple[AxisPoint, ...]
    win_ranges: tuple[tuple[int, int], ...]  # measured values, inclusive: (first win, last win)
    crossovers: tuple[dict, ...]  # {"at": boundary, "between": [a, b], "to": "candidate" | "default"}
    routes: tuple[dict, ...] = field(default=())  # [{"lo", "hi", "kernel": "candidate" | "default"}]

    def to_json(self) -> dict:
        return {
            "axis": self.axis,
            "points": [{"value": p.value, "status": p.status, "ratio": p.ratio,
                        "ci95": list(p.ci95) if p.ci95 else None, "sources": list(p.sources)} for p in self.points],
            "win_ranges": [list(r) for r in self.win_ranges],
            "crossovers": list(self.crossovers),
            "routes": list(self.routes),
        }


def baseline_ratio(shape: dict, baseline: str, where: str) -> tuple[float, tuple[float, float]]:
    ratio = _number(shape.get("ratio"), f"{where} ratio")
    lo, hi = _interval(shape.get("ratio_ci95"), f"{where} ratio_ci95")
    if baseline == DEFAULT:
        # Ratios in a report are against the incumbent; against the default kernel, scale by
        # incumbent/default medians (the interval's relative width is kept: an approximation).
        inc = (shape.get("incumbent") or {}).get("median_us") if isinstance(shape.get("incumbent"), dict) else None
        inc = inc if inc is not None else shape.get("incumbent_median_us")
        dflt = shape.get("default_median_us")
        if inc is not None and dflt is not None:
            scale = _number(inc, f"{where} incumbent_median_us") / _number(dflt, f"{where} default_median_us")
            ratio, lo, hi = ratio * scale, lo * scale, hi * scale
    return ratio, (lo, hi)


def analyze(report: dict, *, axis: str, policy: RunPolicy | None = None, baseline: str = "incumbent") -> RangeAnalysis:
    """Range analysis of one report along `axis` (a key of each benchmark shape, e.g. "n_ctx")."""
    policy = policy or RunPolicy()
    stages = report.get("stages") or {}
    shapes = (stages.get("benchmark") or {}).get("shapes") or []
    by_value: dict[int, list] = {}
    for i, shape in enumerate(shapes):
        if shape.get("held_out"):
            continue  # drawn per run for the generalisation gap: not a point of the serving grid
        where = f"benchmark shape {i}"
        dims = shape.get("shape")
        if not isinstance(dims, dict) or axis not in dims:
            raise ValueError(f"{where} has no {axis!r} in its shape")
        value = int(dims[axis])
        ratio, ci = baseline_ratio(shape, baseline, where)
        # the interval may be rescaled to the default kernel above, so the rule is applied to it directly
        delta = noise_floor(aa_interval(shape), policy, f"{where} aa_ci95")
        faster = judge(ci, delta=delta, what=f"{where} ratio_ci95") == FASTER
        status = WIN if faster else (LOSE if ratio >= 1.0 else TIE)
        by_value.setdefault(value, []).append((status, ratio, ci, "benchmark"))

    e2e_key = E2E_AXIS_OF.get(axis, axis)
    points = [p for p in (stages.get("e2e") or {}).get("points") or [] if isinstance(p, dict) and p.get(e2e_key) is not None]
    e2e_status: dict[int, str] = {}
    for i, point in enumerate(points):
        value = int(point[e2e_key])
        judgement = e2e_judgement(point, policy, f"e2e point {i}")
        if judgement == SLOWER_BEYOND_NOISE:
            status = LOSE
        elif judgement == FASTER:
            status = WIN
        else:
            continue  # untimed, or a tie end to end: neither confirms nor vetoes the kernel's own result
        # e2e ratios are tokens/s (higher is better): as time ratios they are inverted
        tokens = finite(point.get("ratio"))
        ratio = 1.0 / tokens if tokens else None
        lo, hi = _interval(point["ratio_ci95"], f"e2e point {i} ratio_ci95")
        ci_time = (1.0 / hi, 1.0 / lo)
        by_value.setdefault(value, []).append((status, ratio, ci_time, "e2e"))
        e2e_status[value] = LOSE if LOSE in (status, e2e_status.get(value)) else status
    if e2e_status:
        # A kernel-only value the e2e grid did not reach is not trusted past an e2e loss: above the
        # grid it takes the largest context's loss; inside it, a loss on both sides.
        measured = sorted(e2e_status)
        for value, entries in by_value.items():
            if any(e[3] == "e2e" for e in entries):
                continue
            below = [c for c in measured if c < value]
            above = [c for c in measured if c > value]
            if below and not above and e2e_status[below[-1]] == LOSE:
                entries.append((LOSE, None, None, f"e2e@{below[-1]}"))
            elif below and above and e2e_status[below[-1]] == LOSE and e2e_status[above[0]] == LOSE:
                entries.append((LOSE, None, None, f"e2e@{below[-1]}-{above[0]}"))
    return analyze_points(axis, by_value)


def analyze_points(axis: str, by_value: dict[int, list]) -> RangeAnalysis:
    """`by_value`: axis value -> [(status, ratio, ci95, source)], one entry per shape or grid point."""
    if not by_value:
        raise ValueError("no results to analyse")
    points = []
    for value in sorted(by_value):
        entries = by_value[value]
        statuses = {e[0] for e in entries}
        status = LOSE if LOSE in statuses else (TIE if TIE in statuses else WIN)
        # the worst time ratio of any source stands for the value (interpolated at crossovers)
        worst = max(entries, key=lambda e: -1.0 if e[1] is None else e[1])
        points.append(AxisPoint(value, status, worst[1], tuple(worst[2]) if worst[2] else None,
                                tuple(sorted({e[3] for e in entries}))))

    win_ranges, crossovers, routes = [], [], []
    i = 0
    while i < len(points):
        if points[i].status != WIN:
            i += 1
            continue
        j = i
        while j + 1 < len(points) and points[j + 1].status == WIN:
            j += 1
        win_ranges.append((points[i].value, points[j].value))
        lo = 0 if i == 0 else _boundary(points[i - 1], points[i], entering=True)
        hi = None if j == len(points) - 1 else _boundary(points[j], points[j + 1], entering=False)
        if i > 0:
            crossovers.append({"at": lo, "between": [points[i - 1].value, points[i].value], "to": CANDIDATE})
        if hi is not None:
            crossovers.append({"at": hi, "between": [points[j].value, points[j + 1].value], "to": DEFAULT})
        routes.append({"lo": lo, "hi": hi, "kernel": CANDIDATE})
        i = j + 1
    return RangeAnalysis(axis, tuple(points), tuple(win_ranges), tuple(crossovers), tuple(_fill_default(routes)))


def _crossing(a: AxisPoint, b: AxisPoint) -> float | None:
    """Where the ratio crosses 1 between a and b, linear in log(axis); None when it does not."""
    if a.ratio is None or b.ratio is None or a.value <= 0 or (a.ratio - 1.0) * (b.ratio - 1.0) > 0:
        return None
    if a.ratio == b.ratio:
        return None
    t = (1.0 - a.ratio) / (b.ratio - a.ratio)
    return math.exp(math.log(a.value) + t * (math.log(b.value) - math.log(a.value)))


def _boundary(left: AxisPoint, right: AxisPoint, *, entering: bool) -> int:
    """The integer boundary between two measured values; the non-winning one stays with the default."""
    x = _crossing(left, right)
    if entering:  # left loses or ties, right wins: the route starts in (left, right]
        return right.value if x is None else min(right.value, max(left.value + 1, math.ceil(x)))
    # left wins, right does not: the route ends in (left, right], right itself excluded
    return right.value if x is None else min(right.value, max(left.value + 1, math.ceil(x)))


def _fill_default(routes: list[dict]) -> list[dict]:
    """Cover [0, inf) with the candidate's routes and `default` everywhere else."""
    full, at = [], 0
    for route in routes:
        if route["lo"] > at:
            full.append({"lo": at, "hi": route["lo"], "kernel": DEFAULT})
        full.append(route)
        at = route["hi"] if route["hi"] is not None else None
        if at is None:
            break
    if at is not None:
        full.append({"lo": at, "hi": None, "kernel": DEFAULT})
    return full


def analyze_candidate(candidate, *, axis: str | None = None, baseline: str = "incumbent") -> RangeAnalysis | None:
    """Range analysis of a candidate's latest evaluation under its run's policy; None when it was
    never timed (CPU mode) or its report lacks the axis. For the run page and the promote form."""
    evaluation = candidate.evaluations.order_by("-attempt").first()
    if evaluation is None:
        return None
    target_axes = candidate.run.thesis.target.axes or {}
    axis = axis or ("n_ctx" if "n_ctx" in target_axes else next(iter(target_axes), "n_ctx"))
    try:
        return analyze(evaluation.report, axis=axis, policy=RunPolicy.from_json(candidate.run.policy),
                       baseline=baseline)
    except (ValueError, TypeError, KeyError):
        return None
