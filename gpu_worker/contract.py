"""The contract between the loop and a GPU worker: the evaluation spec and the report (docs/contract.md).

Standard library only, so the web side (console, loop) and the GPU side import the same declarations
without torch. Every record is a dataclass; `from_dict` refuses a field it does not declare, naming it, so
a misspelt or stale field fails where it is written instead of being read as missing somewhere else.
A report is written by `to_json` and read by `from_json`; a stored `ark.report/1` report is converted once,
in `upgrade_v1`, and never gets numbers it did not measure.
"""

from __future__ import annotations

import json
import math
from dataclasses import MISSING, dataclass, field, fields

SCHEMA = "ark.report/2"
SCHEMA_V1 = "ark.report/1"
STAGE_NAMES = ("guard", "verify", "benchmark", "e2e")
# A value family whose mean is this many times its shape's fastest family's: the benchmark profiles it on its own
# (its `profile.slowest_family`, pipeline/profile.py) and the candidate page marks it.
SLOW_FAMILY_FACTOR = 1.5
# The largest candidate source a run accepts and the guard reads. A candidate is one file, so a target that
# folds dsa_topk's top-k in (~58 KB) holds it and its own kernels: 64 KiB was reached by the first such file.
MAX_SOURCE_BYTES = 128 * 1024
# Optional fields added within a schema version, by date: a report written before carries none of them and
# reads as "not measured" there (docs/contract.md, "Versions").
ADDITIONS = {
    "2026-12-04": {
        "BenchShape": ("bytes_fraction", "flops_fraction", "profile"),
        "E2EPoint": ("ceiling_tok_s", "ceiling_ratio", "ceiling_ratio_ci95", "ceiling_attained",
                     "gain_attained", "ceiling_parity", "route_hits"),
        "E2EStage": ("route_hits",),
    },
    "2026-12-05": {
        "E2EStage": ("routes",),
    },
}
STATUSES = ("pass", "fail", "error", "skipped", "unavailable", "compile_only", "running")


class ContractError(ValueError):
    """A spec or report that does not match its declaration."""


def _one(cls):
    return field(default=None, metadata={"record": cls, "many": False})


def _many(cls):
    return field(default_factory=list, metadata={"record": cls, "many": True})


class Record:
    """Construction from and to plain JSON-ready dicts, refusing undeclared fields."""

    @classmethod
    def from_dict(cls, data, where: str | None = None):
        where = where or cls.__name__
        if isinstance(data, cls):
            return data
        if not isinstance(data, dict):
            raise ContractError(f"{where}: expected an object, got {type(data).__name__}")
        declared = {_key(f): f for f in fields(cls)}
        unknown = [key for key in data if key not in declared]
        if unknown:
            raise ContractError(f"{where}: unknown field {unknown[0]!r}"
                                + (f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""))
        missing = [key for key, f in declared.items()
                   if f.default is MISSING and f.default_factory is MISSING and key not in data]
        if missing:
            raise ContractError(f"{where}: missing field {missing[0]!r}")
        values = {}
        for key, value in data.items():
            record = declared[key].metadata.get("record")
            if record is not None and value is not None:
                if declared[key].metadata["many"]:
                    if not isinstance(value, list):
                        raise ContractError(f"{where}.{key}: expected a list, got {type(value).__name__}")
                    value = [record.from_dict(v, f"{where}.{key}[{i}]") for i, v in enumerate(value)]
                else:
                    value = record.from_dict(value, f"{where}.{key}")
            values[declared[key].name] = value
        return cls(**values)

    def to_dict(self) -> dict:
        return {_key(f): _clean(getattr(self, f.name)) for f in fields(self)}


def _key(f) -> str:
    """The field's name in JSON: its attribute name, unless that is a Python keyword ("pass")."""
    return f.metadata.get("key", f.name)




def _clean(value):
    """JSON-safe: a non-finite float becomes None (not measured), tuples become lists."""
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


# ---------------------------------------------------------------- the spec: what the loop sends


@dataclass
class EvaluationSpec(Record):
    """One evaluation request. The loop builds it (loop/services/candidates.py), the CLI too."""

    target: str
    source: str
    candidate_id: int | str | None = None  # None: a run outside the loop (tests, scripts)
    attempt: int = 1
    profile: str = "smoke"               # "smoke" or "full"; a CPU worker runs smoke whatever is asked
    incumbent_source: str | None = None  # None: the target's default kernel is the baseline
    incumbent_id: int | None = None
    hardware: str | None = None          # the hardware kind the run asked for ("h200")
    params: dict = field(default_factory=dict)
    seed: int | None = None              # None: a fresh secret seed per evaluation
    e2e: bool = True                     # False skips the e2e stage
    e2e_routes: list | None = None       # the route set the e2e gate serves the candidate in (None: everywhere)
    verify_timeout_s: float | None = None
    world_size: int | None = None        # multi-process targets: ranks (default: the target's own)
    ceilings: dict | None = None         # multi-process targets: measured link rates, if any
    target_document: dict | None = None  # an imported FlashInfer-Bench target (docs/interop.md)

    def __post_init__(self):
        if not isinstance(self.source, str):
            raise ContractError("EvaluationSpec.source: expected a string")
        if self.profile not in ("smoke", "full"):
            raise ContractError(f"EvaluationSpec.profile: {self.profile!r} is not 'smoke' or 'full'")


# ---------------------------------------------------------------- the report: what the worker sends back


@dataclass
class Finding(Record):
    code: str                        # "<stage>:<what>", e.g. "verify:wrong"
    message: str = ""
    line: int | None = None          # guard: the source line
    shape_index: int | None = None   # verify/benchmark: which shape of the stage's list
    rank: int | None = None          # multi-process targets: which rank
    batch: int | None = None         # e2e: the grid point
    context: int | None = None


@dataclass
class VerifyShape(Record):
    shape: dict
    # "pass" in JSON; None: compiled but not run (CuTe DSL on a CPU host)
    passed: bool | None = field(default=False, metadata={"key": "pass"})
    max_error: float | None = None
    message: str = ""
    seconds: float | None = None
    launches: list | None = None     # kernels the candidate launched (by name)
    kernels: list | None = None      # every kernel the profiler saw
    ops: dict | None = None          # torch ops the candidate called, counted


@dataclass
class KernelTiming(Record):
    """One kernel's distribution over its timed calls (one call per input set). In a converted /1 report
    only the median and its interval were measured; the rest is None."""

    median_us: float | None = None
    ci95_us: list | None = None          # the median's bootstrap 95% interval (the name /1 gave it)
    mean_us: float | None = None
    mean_ci95_us: list | None = None
    q1_us: float | None = None
    q3_us: float | None = None
    p99_us: float | None = None
    min_us: float | None = None
    max_us: float | None = None
    slow_fraction: float | None = None   # share of calls slower than 3x the median
    calls: int | None = None
    host_us: float | None = None         # host wall time per replay, the cross-check of the events
    host_event_us: float | None = None   # the events of those same host-timed replays
    stale_replays: int | None = None
    family_mean_us: dict | None = None   # mean per input-value family: where a slow tail comes from
    place_mean_us: list | None = None    # mean by place in each set's order of kernels (0: first): the harness's bias


@dataclass
class BenchShape(Record):
    """One benchmark shape. Measurements only: whether it is faster is loop/policy.py's decision."""

    shape: dict
    held_out: bool = False          # drawn per run, outside the listed shapes (the generalisation gap)
    status: str | None = None       # "error" when a kernel's timings are missing
    input_sets: int | None = None
    rounds: int | None = None
    candidate: KernelTiming | None = _one(KernelTiming)
    incumbent: KernelTiming | None = _one(KernelTiming)
    default: KernelTiming | None = _one(KernelTiming)
    incumbent_aa: KernelTiming | None = _one(KernelTiming)
    ratio: float | None = None           # candidate / incumbent, of the statistic ratio_of names
    ratio_ci95: list | None = None
    ratio_of: str = "mean"               # "mean", or "median" in a converted /1 report
    tail_ratio: float | None = None      # candidate p99 / incumbent p99
    tail_ratio_ci95: list | None = None
    aa_ratio: float | None = None        # incumbent / its own A/A copy: the noise
    aa_ci95: list | None = None
    noise_aa: float | None = None        # the A/A interval's widest distance from 1
    default_ratio: float | None = None   # candidate mean / default mean
    default_median_us: float | None = None
    default_mean_us: float | None = None
    gb_per_s: float | None = None
    tflop_per_s: float | None = None
    floor_us: float | None = None        # the roofline's time for this shape on this hardware
    floor_fraction: float | None = None  # floor_us / candidate time
    bound: str | None = None             # "memory" or "compute"
    bytes_fraction: float | None = None  # achieved bytes/s over the hardware's copy rate (2026-12-04)
    flops_fraction: float | None = None  # achieved FLOP/s over its dense bf16 rate (2026-12-04)
    profile: dict | None = None          # where the candidate's time goes, per GPU kernel (pipeline/profile.py)


def ncu_kernel_text(k: dict, name_chars: int = 60) -> str:
    """One kernel of Nsight Compute's counters (a `profile.ncu.kernels` entry, pipeline/ncu.py) in one line, as
    the CLI, the candidate page's prompt section and the LLM proposer read it. A counter ncu did not give reads
    "?", never 0%."""
    def pct(x):
        return f"{x:.0f}%" if x is not None else "?"
    registers = f"{k['registers']:.0f}" if k.get("registers") is not None else "?"
    return (f"{k['name'][:name_chars]} x{k['launches']} {k['us']:.1f} us, DRAM {pct(k.get('dram_pct'))} of peak, "
            f"SM {pct(k.get('sm_pct'))}, occupancy {pct(k.get('occupancy_pct'))}, "
            f"L2 hits {pct(k.get('l2_hit_pct'))}, {registers} registers")


@dataclass
class E2EPoint(Record):
    """One (batch, context) point of the decode e2e: measured tokens/s and ratios, no verdict."""

    batch: int
    context: int
    default_tok_s: float | None = None
    incumbent_tok_s: float | None = None
    candidate_tok_s: float | None = None
    ceiling_tok_s: float | None = None   # the step with the slot's kernel replaced by a fixed answer (2026-12-04)
    ceiling_ratio: float | None = None   # ceiling / default tokens/s: the most any kernel in the slot can give
    ceiling_ratio_ci95: list | None = None
    ceiling_attained: float | None = None  # candidate / ceiling tokens/s
    gain_attained: float | None = None   # (candidate - default) / (ceiling - default) tokens/s
    ceiling_parity: dict | None = None   # the ceiling step's outputs against the default's
    ratio: float | None = None           # candidate tokens/s over the baseline's
    ratio_ci95: list | None = None
    baseline: str | None = None          # "incumbent" or "default"
    aa_ratio: float | None = None
    aa_ci95: list | None = None
    parity: dict | None = None
    kernel_ran: bool | None = None
    kernel_evidence: list | str | None = None
    step_ms: dict | None = None
    wall_tok_s: dict | None = None
    wall_over_events: dict | None = None
    replays_per_round: int | None = None
    rounds: int | None = None
    round_step_ms: dict | None = None
    timings: str | None = None           # why there are none (cpu-eager)
    error: str | None = None
    route_hits: list | None = None       # per route, its calls in one decode step here (2026-12-04)


@dataclass
class Stage(Record):
    status: str
    findings: list[Finding] = _many(Finding)
    seconds: float = 0.0
    reason: str | None = None            # why a stage did not run

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ContractError(f"{type(self).__name__}.status: {self.status!r} is not one of {STATUSES}")

    @property
    def codes(self) -> list[str]:
        return [f.code for f in self.findings]


@dataclass
class GuardStage(Stage):
    dsl: str | None = None
    kernels: list | None = None


@dataclass
class VerifyStage(Stage):
    shapes: list[VerifyShape] = _many(VerifyShape)
    child_wall_s: float | None = None
    returncode: int | None = None
    ranks_env: dict | None = None        # multi-process targets
    ranks_wall_s: float | None = None


@dataclass
class BenchmarkStage(Stage):
    shapes: list[BenchShape] = _many(BenchShape)
    clocks_before: dict | None = None
    clocks_after: dict | None = None
    claimed_gpu_s: float | None = None
    ceilings: dict | None = None
    started_early: bool | None = None    # the child started beside verification
    child_wall_s: float | None = None
    warm_s: float | None = None
    gate_wait_s: float | None = None
    after_gate_s: float | None = None
    ranks_wall_s: float | None = None


@dataclass
class E2EStage(Stage):
    mode: str | None = None              # "cuda-graphs" or "cpu-eager"
    profile: str | None = None
    grid_hash: str | None = None
    harness: dict | None = None
    points: list[E2EPoint] = _many(E2EPoint)
    device: str | None = None
    date: str | None = None
    model: dict | str | None = None
    route_hits: list | None = None       # per route {route, bounds, kernel, calls} over the grid (2026-12-04)
    routes: list | None = None           # the route set the candidate side served; None: everywhere (2026-12-05)


@dataclass
class Stages(Record):
    """The stages that ran or were recorded as not run; one that never got that far is absent."""

    guard: GuardStage | None = _one(GuardStage)
    verify: VerifyStage | None = _one(VerifyStage)
    benchmark: BenchmarkStage | None = _one(BenchmarkStage)
    e2e: E2EStage | None = _one(E2EStage)

    def to_dict(self) -> dict:
        return {name: stage.to_dict() for name in STAGE_NAMES if (stage := getattr(self, name)) is not None}


@dataclass
class Summary(Record):
    geomean_speedup: float | None = None   # incumbent / candidate over the listed shapes, of ratio_of
    geomean_ci95: list | None = None
    floor_fraction: float | None = None
    held_out_geomean: float | None = None  # the same over the held-out shapes; None when none ran


@dataclass
class Verdict(Record):
    status: str = "error"          # pass, fail or error: whether the harness accepts the candidate
    complete: bool = False         # the benchmark ran and passed
    reasons: list = field(default_factory=list)
    message: str | None = None


@dataclass
class Hardware(Record):
    kind: str
    gpu: str | None = None
    driver: str | None = None
    memory_mib: int | None = None
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    throttle_reasons: str | None = None
    visible_devices: str | None = None


@dataclass
class Report(Record):
    candidate_id: int | str | None = None
    target: str | None = None
    schema: str = SCHEMA
    attempt: int = 1
    target_version: int | None = None
    profile: str | None = None
    profile_effective: str | None = None
    date: str | None = None
    mode: str | None = None              # "gpu" or "cpu"
    world_size: int | None = None        # multi-process targets
    hardware: Hardware | None = _one(Hardware)
    isolation: dict | None = None        # the protections the child ran under (docs/isolation.md)
    stages: Stages = field(default_factory=Stages, metadata={"record": Stages, "many": False})
    summary: Summary = field(default_factory=Summary, metadata={"record": Summary, "many": False})
    verdict: Verdict = field(default_factory=Verdict, metadata={"record": Verdict, "many": False})
    wall_s: float | None = None

    def __post_init__(self):
        if self.schema != SCHEMA:
            raise ContractError(f"Report.schema: {self.schema!r}, expected {SCHEMA!r} (upgrade_v1 converts /1)")

    def stage(self, name: str) -> Stage | None:
        if name not in STAGE_NAMES:
            raise KeyError(name)
        return getattr(self.stages, name)


STAGE_TYPES = {"guard": GuardStage, "verify": VerifyStage, "benchmark": BenchmarkStage, "e2e": E2EStage}


def stage_from_dict(name: str, data: dict) -> Stage:
    return STAGE_TYPES[name].from_dict(data, f"stages.{name}")


# ---------------------------------------------------------------- writing and reading


def to_json(report: Report) -> dict:
    """The report as JSON-ready data (what the worker sends and the loop stores)."""
    if not isinstance(report, Report):
        raise ContractError(f"to_json: expected a Report, got {type(report).__name__}")
    return report.to_dict()


def from_json(data: dict | str) -> Report:
    """A stored or received report, /2 as it is, /1 converted by upgrade_v1."""
    if isinstance(data, (str, bytes)):
        data = json.loads(data)
    if not isinstance(data, dict):
        raise ContractError(f"from_json: expected an object, got {type(data).__name__}")
    if data.get("schema") == SCHEMA_V1:
        data = upgrade_v1(data)
    return Report.from_dict(data)


def upgrade_v1(old: dict) -> dict:
    """An ark.report/1 report as /2 data. /1 measured medians only: they stay as medians, the ratio of
    medians stays the ratio with ratio_of="median", and what /1 did not measure (means, tails, slow
    fractions) stays None. /1's verdict fields on the GPU side (faster, delta, e2e verdict, noise) go:
    loop/policy.py decides from the intervals."""
    new = {k: v for k, v in old.items()}
    new["schema"] = SCHEMA
    stages = dict(old.get("stages") or {})
    if "benchmark" in stages:
        bench = dict(stages["benchmark"])
        bench["shapes"] = [_upgrade_bench_shape(s) for s in bench.get("shapes") or []]
        stages["benchmark"] = bench
    if "e2e" in stages:
        e2e = dict(stages["e2e"])
        if "points" in e2e:
            e2e["points"] = [_upgrade_e2e_point(p) for p in e2e["points"] or []]
        stages["e2e"] = e2e
    new["stages"] = stages
    summary = dict(old.get("summary") or {})
    summary.setdefault("held_out_geomean", None)
    new["summary"] = summary
    return new


def _upgrade_bench_shape(old: dict) -> dict:
    new = {k: v for k, v in old.items() if k not in ("faster", "delta")}
    if new.get("ratio") is not None:
        new["ratio_of"] = "median"
    if new.get("aa_ci95") is None and new.get("noise_aa") is not None:
        # /1 kept only how far the A/A interval reached from 1; the noise floor depends on nothing else,
        # so that reach stands for both ends and the policy reads every report's aa_ci95 alike
        reach = abs(float(new["noise_aa"]))
        new["aa_ci95"] = [1.0 - reach, 1.0 + reach]
    return new


def _upgrade_e2e_point(old: dict) -> dict:
    new = {k: v for k, v in old.items() if k not in ("verdict", "noise")}
    if "ci95" in new:
        new["ratio_ci95"] = new.pop("ci95")
    return new
