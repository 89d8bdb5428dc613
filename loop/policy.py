"""The run's policy and the noise rule: pure functions of a report (gpu_worker/contract.py, as JSON).

loop/keep.py decides keep or revert with these; loop/regions.py and loop/ranges.py judge cells and ranges
with the same rule.

"Faster" (docs/keep-rule.md): ratio = candidate mean / incumbent mean (per shape, over many fresh input
sets); accept only if the upper bound of its 95% interval is below 1 - delta, delta = max(threshold,
noise_multiplier x how far the A/A interval reaches from 1). One function, `judge`, applies that rule to
every interval the policy, the regions and the range analysis look at: the benchmark's mean ratio, its
tail (p99) ratio, and the e2e grid's ratios. The GPU side only measures; nothing there decides faster or slower.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

REPORT_SCHEMA = "ark.report/1"
# A stored /1 report is converted to /2 by gpu_worker/contract.py; both carry the field names read here.
READABLE_SCHEMAS = (REPORT_SCHEMA, "ark.report/2")

KEEP, REVERT, ERROR = "keep", "revert", "error"

# Reason codes (the run page and tests read these; `guard:<finding code>` is built per finding).
INCORRECT = "incorrect"
SLOWER = "slower"
NOISE = "noise"
E2E_REGRESSION = "e2e_regression"
UNMEASURED = "unmeasured"
VETOED = "vetoed"
REASON_ERROR = "error"
FASTER = "faster"
TAIL = "bench:tail"
REGION = "region"  # kept for the cells it wins, left out where it loses (docs/keep-rule.md)
SLOWER_BEYOND_NOISE, WITHIN_NOISE = "slower", "noise"

UNMEASURED_TEXT = "timings need a GPU worker"

# A report stage's status (gpu_worker/contract.py writes them)
STAGE_PASS, STAGE_FAIL, STAGE_ERROR = "pass", "fail", "error"
STAGE_SKIPPED, STAGE_UNAVAILABLE = "skipped", "unavailable"
STAGE_COMPILE_ONLY = "compile_only"
E2E_NOTES = {"e2e:timing_note"}
# Findings that say the harness failed, not the candidate.
HARNESS_CODES = {"e2e:point_error", "e2e:exception"}


@dataclass(frozen=True)
class RunPolicy:
    """A run's acceptance policy (Run.policy JSON, with defaults)."""

    threshold: float = 0.02  # the smallest speedup worth keeping, as a fraction (2%)
    noise_multiplier: float = 2.0  # delta >= this x the A/A spread
    plateau_k: int = 10  # stop after this many final candidates in a row without a keep
    floor_fraction_stop: float | None = None  # stop once a kept candidate reaches this fraction of the roofline
    max_attempts: int = 3  # evaluations of one candidate before the reaper gives up on it
    allow_tail_regression: bool = False  # keep a candidate whose p99 is worse than the incumbent's beyond noise

    @classmethod
    def from_json(cls, data: dict | None) -> RunPolicy:
        data = data or {}
        known = {name: data[name] for name in cls.__dataclass_fields__ if data.get(name) is not None}
        policy = cls(**known)
        if not 0 <= policy.threshold < 1:
            raise ValueError(f"threshold must be a fraction in [0, 1), got {policy.threshold}")
        if policy.plateau_k < 1 or policy.max_attempts < 1:
            raise ValueError("plateau_k and max_attempts must be at least 1")
        if policy.floor_fraction_stop is not None and not 0 < policy.floor_fraction_stop <= 1:
            raise ValueError(f"floor_fraction_stop must be in (0, 1], got {policy.floor_fraction_stop}")
        return policy

    def to_json(self) -> dict:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass(frozen=True)
class Outcome:
    """What the policy decided: `keep`, `revert` or `error`, a reason code and one sentence."""

    verdict: str
    reason_code: str
    reason_text: str
    numbers: dict = field(default_factory=dict)

    @property
    def passes(self) -> bool:
        return self.verdict == KEEP


class ReportError(ValueError):
    """The report lacks something the decision needs."""


def finite(value) -> float | None:
    """`value` as a finite float, or None (bools, strings, NaN, infinities, ints beyond float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def _number(value, what: str) -> float:
    number = finite(value)
    if number is None:
        raise ReportError(f"{what} is not a finite number ({str(value)[:40]})")
    return number


def _interval(value, what: str) -> tuple[float, float]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ReportError(f"{what} is not a [low, high] pair ({value!r})")
    lo, hi = _number(value[0], what), _number(value[1], what)
    if lo > hi:
        raise ReportError(f"{what} has its low above its high ({value!r})")
    return lo, hi


def report_stage(report: dict, name: str) -> dict:
    stages = report.get("stages")
    if not isinstance(stages, dict):
        raise ReportError("the report has no stages")
    stage = stages.get(name)
    if not isinstance(stage, dict) or not isinstance(stage.get("status"), str):
        raise ReportError(f"the report has no {name} stage with a status")
    return stage


def stage_findings(stage: dict) -> list[dict]:
    findings = stage.get("findings") or []
    return [f for f in findings if isinstance(f, dict)] if isinstance(findings, list) else []


def describe_finding(finding: dict) -> str:
    text = str(finding.get("message") or finding.get("code") or "a finding")
    line = finding.get("line")
    return f"{text} (line {line})" if isinstance(line, int) else text


def noise_floor(aa_ci95, policy: RunPolicy, what: str = "aa_ci95") -> float:
    """delta = max(threshold, noise_multiplier x how far the A/A interval reaches from 1).

    The A/A interval times the baseline against itself: whatever it shows is noise, so a speedup must
    clear it by the run's multiplier, and never less than the smallest speedup the run cares about."""
    lo, hi = _interval(aa_ci95, what)
    return max(policy.threshold, policy.noise_multiplier * max(abs(1.0 - lo), abs(hi - 1.0)))


def aa_interval(entry: dict):
    """A benchmark shape's or e2e point's A/A interval. A converted ark.report/1 entry measured only how far
    its A/A interval reached from 1 (`noise_aa`; e2e `noise`): the floor depends on nothing else, so that
    reach stands for both ends."""
    if entry.get("aa_ci95") is not None:
        return entry["aa_ci95"]
    reach = entry.get("noise_aa", entry.get("noise"))
    return None if reach is None else [1.0 - abs(_number(reach, "noise_aa")), 1.0 + abs(_number(reach, "noise_aa"))]


def judge(ratio_ci95, aa_ci95=None, policy: RunPolicy | None = None, what: str = "ratio_ci95", *,
          delta: float | None = None) -> str:
    """The one noise rule (docs/keep-rule.md). `ratio_ci95` is the 95% interval of a time ratio (candidate /
    baseline, lower is better): FASTER when it lies wholly below 1 - delta, SLOWER_BEYOND_NOISE when wholly
    above 1 + delta, else WITHIN_NOISE. delta is the noise floor of the interval's own A/A interval under
    the run's policy (`noise_floor`); a caller that already holds the floor (the aggregate's, or one it
    also names in its reason) passes it as `delta` instead. The benchmark's aggregate and shapes, their
    tails, the e2e grid points, the winning regions and the range analysis are all judged here."""
    if (delta is None) == (policy is None):
        raise TypeError("judge takes either the run's policy (with the A/A interval) or a delta, not both")
    lo, hi = _interval(ratio_ci95, what)
    if delta is None:
        delta = noise_floor(aa_ci95, policy, f"{what} A/A interval")
    if hi < 1.0 - delta:
        return FASTER
    if lo > 1.0 + delta:
        return SLOWER_BEYOND_NOISE
    return WITHIN_NOISE


def tail_regressions(shapes: list[dict], policy: RunPolicy) -> list[dict]:
    """Timed shapes (not held out) whose p99 ratio is worse than the incumbent's beyond noise."""
    return [s for i, s in enumerate(shapes) if not s.get("held_out") and s.get("tail_ratio_ci95") is not None
            and judge(s["tail_ratio_ci95"], aa_interval(s), policy,
                      f"benchmark shape {i} tail_ratio_ci95") == SLOWER_BEYOND_NOISE]


def noise_delta(shapes: list[dict], policy: RunPolicy) -> float:
    """The aggregate's noise floor (docs/keep-rule.md): the aggregate ratio is a geomean over the timed
    shapes, so its A/A interval is the geomean of theirs. Taking the widest shape's floor instead let one
    launch-bound shape with a jittery A/A (18% at 1 x 2048 on the H200) veto a 1.56x win everywhere."""
    bounds = [_interval(aa_interval(s), f"benchmark shape {i} aa_ci95")
              for i, s in enumerate(shapes) if not s.get("held_out")]
    if not bounds:
        raise ReportError("the benchmark has no timed shapes")
    return noise_floor((_geomean([lo for lo, _ in bounds]), _geomean([hi for _, hi in bounds])), policy)


def benchmark_ratio(report: dict) -> tuple[float, tuple[float, float]]:
    """The aggregate ratio (candidate / incumbent time) and its 95% interval.

    From the summary's geomean speedup (incumbent / candidate) when present; otherwise the
    geometric mean of the per-shape ratios and, conservatively, of their interval bounds.
    """
    summary = report.get("summary") if isinstance(report.get("summary"), dict) else {}
    if summary.get("geomean_speedup") is not None and summary.get("geomean_ci95") is not None:
        speedup = _number(summary["geomean_speedup"], "summary.geomean_speedup")
        lo, hi = _interval(summary["geomean_ci95"], "summary.geomean_ci95")
        if speedup <= 0 or lo <= 0:
            raise ReportError("summary speedups must be positive")
        return 1.0 / speedup, (1.0 / hi, 1.0 / lo)
    shapes = [s for s in report_benchmark_shapes(report) if not s.get("held_out")]
    ratios = [_number(s.get("ratio"), f"benchmark shape {i} ratio") for i, s in enumerate(shapes)]
    intervals = [_interval(s.get("ratio_ci95"), f"benchmark shape {i} ratio_ci95") for i, s in enumerate(shapes)]
    if not ratios or any(r <= 0 for r in ratios) or any(lo <= 0 for lo, _ in intervals):
        raise ReportError("benchmark ratios must be positive")
    return _geomean(ratios), (_geomean([lo for lo, _ in intervals]), _geomean([hi for _, hi in intervals]))


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def report_benchmark_shapes(report: dict) -> list[dict]:
    shapes = report_stage(report, "benchmark").get("shapes")
    if not isinstance(shapes, list) or not shapes or not all(isinstance(s, dict) for s in shapes):
        raise ReportError("the benchmark stage has no shapes")
    return shapes


def e2e_judgement(point: dict, policy: RunPolicy, where: str = "e2e point") -> str | None:
    """FASTER, SLOWER_BEYOND_NOISE or WITHIN_NOISE for one e2e grid point; None when it was not timed.

    An e2e `ratio` is tokens/s (candidate / baseline, higher is better; gpu_worker/e2e/gate.py), so its
    interval is inverted into a time ratio and judged by the same rule as the benchmark."""
    if point.get("ratio_ci95") is None:
        return None
    lo, hi = _interval(point["ratio_ci95"], f"{where} ratio_ci95")
    if lo <= 0:
        raise ReportError(f"{where} ratio_ci95 must be positive")
    return judge((1.0 / hi, 1.0 / lo), aa_interval(point), policy, f"{where} ratio_ci95")


def e2e_regressions(points: list[dict], policy: RunPolicy) -> list[dict]:
    """Grid points slower end to end beyond noise."""
    worse = []
    for i, point in enumerate(points):
        if not isinstance(point, dict):
            raise ReportError(f"e2e point {i} is not an object")
        if e2e_judgement(point, policy, f"e2e point {i}") == SLOWER_BEYOND_NOISE:
            worse.append(point)
    return worse


def summary_numbers(report) -> dict:
    """Evaluation's summary columns, None where the report has no number (CPU mode)."""
    out = {"geomean_speedup": None, "speedup_ci_lo": None, "speedup_ci_hi": None, "e2e_delta": None,
           "floor_fraction": None}
    if not isinstance(report, dict):
        return out
    summary = report.get("summary") if isinstance(report.get("summary"), dict) else {}
    try:
        if summary.get("geomean_speedup") is not None:
            out["geomean_speedup"] = _number(summary["geomean_speedup"], "geomean_speedup")
        if summary.get("geomean_ci95") is not None:
            out["speedup_ci_lo"], out["speedup_ci_hi"] = _interval(summary["geomean_ci95"], "geomean_ci95")
        if summary.get("floor_fraction") is not None:
            out["floor_fraction"] = _number(summary["floor_fraction"], "floor_fraction")
        stages = report.get("stages") if isinstance(report.get("stages"), dict) else {}
        points = (stages.get("e2e") or {}).get("points") if isinstance(stages.get("e2e"), dict) else None
        ratios = [finite(p.get("ratio")) for p in points or [] if isinstance(p, dict)]
        ratios = [r for r in ratios if r is not None]
        if ratios:
            out["e2e_delta"] = min(ratios) - 1.0  # the worst grid point's tokens/s change (negative: slower)
    except ReportError:
        pass
    return out


def gpu_seconds(report) -> float:
    """Device time the evaluation took, from the report's stage timings (0 when it says nothing)."""
    if not isinstance(report, dict):
        return 0.0
    for key in ("gpu_seconds", "elapsed_s", "wall_s"):
        value = finite(report.get(key))
        if value is not None and value >= 0:
            return value
    total = 0.0
    stages = report.get("stages") if isinstance(report.get("stages"), dict) else {}
    for stage in stages.values():
        if not isinstance(stage, dict):
            continue
        for key in ("seconds", "elapsed_s", "wall_s", "duration_s"):
            value = finite(stage.get(key))
            if value is not None and value >= 0:
                total += value
                break
    return total
