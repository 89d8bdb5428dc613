"""Read queries for pages and charts. No writes here."""

from collections import Counter
from datetime import timedelta

from django.conf import settings
from django.core.paginator import Page, Paginator
from django.db import connection
from django.db.models import Count, Max, Prefetch, Q
from django.utils import timezone

from gpu_worker.contract import SLOW_FAMILY_FACTOR, STAGE_NAMES, ContractError, Report, from_json
from gpu_worker.serving_config import AXES
from gpu_worker.target_catalog import CATALOG
from loop import policy
from loop.models import (
    Candidate,
    Decision,
    Evaluation,
    Event,
    Ping,
    Run,
    ServingConfig,
    SkillDoc,
    SkillRevision,
    Target,
    Thesis,
    Worker,
)
from loop.services.candidates import OPEN

OUTCOMES = ("kept", "reverted", "vetoed", "error", "awaiting_review", "in_flight")


def recent_pings(limit: int = 10):
    return list(Ping.objects.order_by("-id")[:limit])


def workers_with_liveness():
    deadline = timezone.now() - timedelta(seconds=settings.ARK_HEARTBEAT_TIMEOUT_S)
    return [(worker, worker.last_heartbeat >= deadline) for worker in Worker.objects.all()]


def last_seq() -> int:
    return Event.objects.order_by("-id").values_list("id", flat=True).first() or 0


# --- runs and their progress ---------------------------------------------------------------------------

def outcome_of(status: str) -> str:
    return "in_flight" if status in OPEN else status  # waiting to be sent counts too


def run_progress(run: Run, by_status: Counter) -> dict:
    """Budget used and candidates by outcome, for progress bars, from the run's candidates counted by status
    (runs_progress counts them for many runs in one query, run_candidates for one run's page)."""
    outcomes = Counter()
    for status, n in by_status.items():
        outcomes["in_flight" if status in OPEN else status] += n
    total = sum(by_status.values())
    gpu_minutes = (run.gpu_seconds_used or 0.0) / 60.0

    def pct(used, budget):
        return 0 if not budget else min(100, round(100 * used / budget))

    return {
        "run": run, "total": total, "outcomes": [(name, outcomes.get(name, 0)) for name in OUTCOMES],
        "outcome_pct": [(name, pct(outcomes.get(name, 0), run.budget_candidates)) for name in OUTCOMES],
        "candidates_pct": pct(total, run.budget_candidates),
        "gpu_minutes": gpu_minutes, "gpu_pct": pct(gpu_minutes, run.budget_gpu_minutes),
    }


def runs_progress(runs) -> list[dict]:
    """run_progress of each of `runs`, their candidates counted in one query for all."""
    runs = list(runs)
    counts = {run.pk: Counter() for run in runs}
    for row in (Candidate.objects.filter(run__in=runs).order_by().values("run_id", "status")
                .annotate(n=Count("id"))):
        counts[row["run_id"]][row["status"]] = row["n"]
    return [run_progress(run, counts[run.pk]) for run in runs]


def active_runs() -> list[dict]:
    return runs_progress(Run.objects.filter(status__in=[Run.Status.RUNNING, Run.Status.PAUSED])
                         .select_related("thesis__target"))


def recent_decisions(limit: int = 15):
    """The newest decisions with what the dashboard's feed shows of each: not the candidate's source, run or thesis
    (the feed names a candidate by its run's id and its number)."""
    return list(Decision.objects.select_related("candidate")
                .only("candidate", "verdict", "reason_code", "reason_text", "actor", "created",
                      "candidate__run", "candidate__number")
                .order_by("-created", "-id")[:limit])


def dashboard_state() -> dict:
    return {
        "workers": workers_with_liveness(),
        "pings": recent_pings(),
        "active_runs": active_runs(),
        "decisions": recent_decisions(),
        "last_seq": last_seq(),
    }


# --- theses --------------------------------------------------------------------------------------------

# sort key -> ordering; "-<key>" reverses it. Priority and creation time list the newest, highest first.
THESIS_SORTS = {
    "priority": ["-priority", "-created"], "created": ["-created"], "title": ["title"],
    "owner": ["owner__username", "-priority"], "status": ["status", "-priority"],
    "target": ["target__name", "-priority"], "hardware": ["hardware", "-priority"],
}


def _thesis_ordering(sort: str) -> list[str]:
    reverse = sort.startswith("-")
    ordering = THESIS_SORTS.get(sort.lstrip("-"), THESIS_SORTS["priority"])
    if not reverse:
        return ordering
    return [field[1:] if field.startswith("-") else f"-{field}" for field in ordering[:1]] + ordering[1:]


def theses_list(*, status: str = "", owner: str = "", target: str = "", hardware: str = "", q: str = "",
                sort: str = "priority"):
    theses = Thesis.objects.select_related("owner", "target").annotate(run_count=Count("runs"))
    if status:
        theses = theses.filter(status=status)
    if owner:
        theses = theses.filter(owner__username=owner)
    if target:
        theses = theses.filter(target__name=target)
    if hardware:
        theses = theses.filter(hardware=hardware)
    if q:
        theses = theses.filter(Q(title__icontains=q) | Q(body__icontains=q))
    return theses.order_by(*_thesis_ordering(sort))


def thesis_filter_choices() -> dict:
    return {
        "statuses": Thesis.Status.values,
        "owners": sorted(set(Thesis.objects.values_list("owner__username", flat=True))),
        "targets": list(Target.objects.values_list("name", flat=True)),
        "hardware": sorted(set(Thesis.objects.values_list("hardware", flat=True))),
    }


# --- skills --------------------------------------------------------------------------------------------

def skill_tree() -> list[tuple[str, list]]:
    """Skill documents grouped by folder ("hardware/h200", "models/deepseek-v3.2", "rules"), each with
    its latest revision."""
    latest = SkillRevision.objects.order_by("-number")
    docs = SkillDoc.objects.prefetch_related(Prefetch("revisions", queryset=latest.select_related("author")))
    groups: dict[str, list] = {}
    for doc in docs:
        folder = doc.key.rsplit("/", 1)[0] if "/" in doc.key else ""
        revisions = list(doc.revisions.all())
        groups.setdefault(folder, []).append((doc, revisions[0] if revisions else None, len(revisions)))
    return sorted(groups.items())


def skill_latest(doc: SkillDoc) -> SkillRevision | None:
    return doc.revisions.select_related("author").order_by("-number").first()


def skill_revisions(doc: SkillDoc):
    return list(doc.revisions.select_related("author").order_by("-number"))


def skill_texts():
    """(key, latest text) for every document, for export."""
    for doc in SkillDoc.objects.all():
        revision = skill_latest(doc)
        if revision is not None:
            yield doc.key, revision.text


# --- reports -------------------------------------------------------------------------------------------

def read_report(report) -> Report | None:
    """A stored report through the contract (a /1 report converted); None when it does not read, which the
    pages show as no results rather than guessing at other spellings. A Report already read is returned as it
    is: a page that shows a report in several parts reads it once (the candidate page read it nine times)."""
    if isinstance(report, Report):
        return report
    if not report:
        return None
    try:
        return from_json(report)
    except ContractError:
        return None


def benchmark_entries(report: dict | Report) -> list[dict]:
    """The benchmark's per-shape entries as the contract writes them (one spelling per field)."""
    read = read_report(report)
    bench = read.stages.benchmark if read else None
    return [entry.to_dict() for entry in bench.shapes] if bench else []


def _timing(timing, statistic: str):
    """(time_us, lo_us, hi_us) of one kernel for the statistic its shape's ratio is of; None where not measured."""
    if timing is None:
        return None, None, None
    value = getattr(timing, f"{statistic}_us")
    ci = timing.mean_ci95_us if statistic == "mean" else timing.ci95_us
    lo, hi = ci if ci and len(ci) == 2 else (None, None)
    return value, lo, hi


# A kernel whose mean by place in the benchmark's order (first, second, ...) spreads more than this share of its
# mean: the timing of that shape carried the harness's own bias (docs/benchmark.md, "The place in the order").
PLACE_BIAS = 0.05


def place_bias(entry) -> float | None:
    """The widest spread of one kernel's place means at this shape, as a share of its mean; None where the
    report has no place means (before 2026-12-07)."""
    spreads = [(max(t.place_mean_us) - min(t.place_mean_us)) / t.mean_us
               for t in (entry.candidate, entry.incumbent, entry.incumbent_aa, entry.default)
               if t is not None and t.place_mean_us and t.mean_us]
    return max(spreads) if spreads else None


def _shape_label(shape) -> str:
    if isinstance(shape, dict):
        return ", ".join(f"{k}={v}" for k, v in shape.items())
    return str(shape)


def benchmark_shapes(report: dict | Report, axis: str | None = None) -> list[dict]:
    """Per-shape timings of candidate, incumbent and default kernel, from report.benchmark.shapes: means,
    or medians in a report converted from ark.report/1 (`ratio_of` says which)."""
    read = read_report(report)
    bench = read.stages.benchmark if read else None
    rows = []
    for entry in bench.shapes if bench else []:
        shape = entry.shape
        x = shape.get(axis) if axis else None
        if x is None:
            x = next((v for v in shape.values() if isinstance(v, (int, float))), None)
        cand = _timing(entry.candidate, entry.ratio_of)
        inc = _timing(entry.incumbent, entry.ratio_of)
        default = _timing(entry.default, entry.ratio_of)
        ratio, ratio_ci = entry.ratio, entry.ratio_ci95
        bias = place_bias(entry)
        if cand[0] is not None and cand[1] is None and inc[0] is not None and ratio_ci:
            # The harness gives the interval of the paired ratio; drawn around the candidate as incumbent x ratio.
            cand = (cand[0], inc[0] * ratio_ci[0], inc[0] * ratio_ci[1])
        rows.append({
            "label": _shape_label(shape), "x": x, "held_out": entry.held_out, "ratio_of": entry.ratio_of,
            "candidate": cand, "incumbent": inc, "default": default, "floor_us": entry.floor_us,
            "ratio": ratio, "speedup": (1.0 / ratio) if ratio else None,
            "ratio_ci": ratio_ci if ratio_ci and len(ratio_ci) == 2 else None,
            "floor_fraction": entry.floor_fraction,
            "place_bias": bias, "place_biased": bias is not None and bias > PLACE_BIAS,
        })
    return rows


def family_table(report: dict | Report, order: tuple[str, ...] = ()) -> dict | None:
    """Per shape and input-value family, the candidate's mean and the incumbent's (the benchmark rotates every
    shape's input sets over the target's families): where a slow tail comes from, and whether the incumbent has
    it too. Families in `order` (the target's), then any other by name: a stored report's keys keep no order
    (PostgreSQL's jsonb sorts them). None where the report has no family means."""
    read = read_report(report)
    bench = read.stages.benchmark if read else None
    rows, families = [], []
    for entry in bench.shapes if bench else []:
        cand = entry.candidate.family_mean_us if entry.candidate else None
        if not cand:
            continue
        inc = (entry.incumbent.family_mean_us if entry.incumbent else None) or {}
        families += [f for f in cand if f not in families]
        fastest = min(cand.values())
        rows.append({"label": _shape_label(entry.shape), "held_out": entry.held_out,
                     "cells": {f: {"candidate": cand[f], "incumbent": inc.get(f),
                                   # a family this much slower than the shape's fastest: where its tail is
                                   "slow": cand[f] > SLOW_FAMILY_FACTOR * fastest} for f in cand}})
    if not rows:
        return None
    families = [f for f in order if f in families] + sorted(f for f in families if f not in order)
    for row in rows:
        row["cells"] = [row["cells"].get(f) for f in families]
    return {"families": families, "rows": rows, "slow_factor": SLOW_FAMILY_FACTOR}


def e2e_grid(report: dict | Report, run_policy: policy.RunPolicy | None = None) -> list[dict]:
    """The e2e grid: per (batch, context) tokens/s both ways, the tokens/s ratio with its interval, parity,
    and the keep rule's reading of the point under the run's policy (loop/policy.py)."""
    read = read_report(report)
    e2e = read.stages.e2e if read else None
    run_policy = run_policy or policy.RunPolicy()
    rows = []
    for point in e2e.points if e2e else []:
        base = point.incumbent_tok_s if point.incumbent_tok_s is not None else point.default_tok_s
        cand, ratio = point.candidate_tok_s, point.ratio
        # ratio: candidate / baseline tokens per second, higher is better (gpu_worker/e2e/gate.py)
        delta = (cand / base - 1) if (base and cand is not None) else ((ratio - 1) if ratio else None)
        try:
            verdict = policy.e2e_judgement(point.to_dict(), run_policy) or ""
        except policy.ReportError:
            verdict = ""
        rows.append({"batch": point.batch, "n_ctx": point.context, "base": base, "candidate": cand,
                     "ratio": ratio, "delta": delta,
                     "ci95": point.ratio_ci95 if point.ratio_ci95 and len(point.ratio_ci95) == 2 else None,
                     "verdict": verdict, "parity": (point.parity or {}).get("ok"), "error": point.error or ""})
    return sorted(rows, key=lambda r: (r["batch"] or 0, r["n_ctx"] or 0))


def guard_findings(report: dict | Report, source: str) -> list[dict]:
    """Every stage's findings, each with the candidate's source lines around it when it names a line."""
    read = read_report(report)
    lines = (source or "").splitlines()
    findings = []
    for stage_name in STAGE_NAMES:
        stage = read.stage(stage_name) if read else None
        for finding in stage.findings if stage else []:
            line = finding.line
            excerpt = []
            if isinstance(line, int) and 1 <= line <= len(lines):
                excerpt = [(n, lines[n - 1], n == line) for n in range(max(1, line - 2), min(len(lines), line + 2) + 1)]
            findings.append({"stage": stage_name, "code": finding.code, "message": finding.message,
                             "line": line, "excerpt": excerpt})
    return findings


def report_logs(report: dict | Report) -> str:
    """One line per stage: status, time, and why it did not run; then the verdict's reasons."""
    read = read_report(report)
    if read is None:
        return ""
    lines = []
    for name in STAGE_NAMES:
        stage = read.stage(name)
        if stage is None:
            continue
        lines.append(f"[{name}] {stage.status} in {stage.seconds:.2f} s" + (f": {stage.reason}" if stage.reason else ""))
    verdict = read.verdict
    if verdict.message or verdict.reasons:
        lines.append(f"[verdict] {verdict.status} {verdict.message or ', '.join(verdict.reasons)}")
    return "\n".join(lines)


def timings_available(report: dict | Report) -> bool:
    read = read_report(report)
    bench = read.stages.benchmark if read else None
    if bench is None or bench.status in ("unavailable", "skipped"):
        return False
    return any(row["candidate"][0] is not None for row in benchmark_shapes(report))


def is_cpu_mode(hardware: str) -> bool:
    """CPU mode: the hardware kind is a CPU queue, or every worker that serves it has no GPU."""
    if (hardware or "").lower().startswith("cpu"):
        return True
    kinds = [(w.fingerprint or {}).get("kind") for w in Worker.objects.filter(hardware=hardware)]
    return bool(kinds) and all(kind == "cpu" for kind in kinds)


def serving_axis(target: Target) -> str | None:
    """The workload axis routes are cut along: n_ctx where the target has it (as serving configs do)."""
    axes = list(target.axes or {}) if isinstance(target.axes, dict) else []
    return next((a for a in axes if a in AXES), axes[0] if axes else None)


# --- run and candidate pages ---------------------------------------------------------------------------

# A run page lists this many candidates per page, newest first (every one awaiting review is on the first
# page too): a run of hundreds of candidates rendered whole cost 0.4 s a request (docs/scaling.md).
RUN_PAGE_ROWS = 50


# What a run page's row shows and the staleness check reads (loop/staleness.py): the rest of a candidate (its
# source, diff and params), its parent, and an evaluation's report and fingerprint stay in the database. Reading
# whole rows was half of a run page's time (docs/scaling.md); a field missing here costs a query per row, which
# tests/console/test_request_cost.py would see.
ROW_FIELDS = ("run", "number", "proposer", "proposal", "author", "status", "stage", "attempt", "reason_code",
              "reason_text", "measured_against", "measured_config_version")
ROW_EVALUATION_FIELDS = ("candidate", "attempt", "geomean_speedup", "speedup_ci_lo", "speedup_ci_hi", "e2e_delta")
ROW_DECISION_FIELDS = ("candidate", "verdict", "reason_code", "reason_text", "created")


def _with_history(candidates) -> list[Candidate]:
    """Candidates, newest first, as a run page's rows: each with its latest evaluation and latest decision
    attached (ROW_* fields only), and its outcome. Prefetched into plain lists: a row costs no query and no
    related manager."""
    rows = list(candidates.only(*ROW_FIELDS).select_related("author").prefetch_related(
        Prefetch("evaluations", queryset=Evaluation.objects.only(*ROW_EVALUATION_FIELDS).order_by("attempt"),
                 to_attr="history"),
        Prefetch("decisions", queryset=Decision.objects.only(*ROW_DECISION_FIELDS).order_by("created", "id"),
                 to_attr="verdicts"),
    ).order_by("-number"))
    for candidate in rows:
        _attach_latest(candidate, candidate.history, candidate.verdicts)
    return rows


def _attach_latest(candidate: Candidate, evaluations: list, decisions: list) -> None:
    """Give a candidate its latest evaluation and decision (from its lists, oldest first) and its outcome."""
    candidate.latest_evaluation = evaluations[-1] if evaluations else None
    candidate.latest_decision = decisions[-1] if decisions else None
    candidate.outcome = outcome_of(candidate.status)


def run_candidates(run: Run, page=1) -> tuple[list[Candidate], Page, int, Counter]:
    """One page of the run's candidates (newest first) plus, on the first page, every candidate awaiting
    review wherever it falls; the page itself, for the page links; how many await review; and the run's
    candidates counted by status. One query of (pk, status) over the run gives the page, the awaiting and the
    counts: a run of a few thousand candidates is a few thousand small rows."""
    rows = list(run.candidates.order_by("-number").values_list("pk", "status"))
    page_of = Paginator([pk for pk, _ in rows], RUN_PAGE_ROWS).get_page(page)
    awaiting = {pk for pk, status in rows if status == Candidate.Status.AWAITING_REVIEW}
    shown = set(page_of.object_list) | (awaiting if page_of.number == 1 else set())
    candidates = _with_history(run.candidates.filter(pk__in=shown))
    return candidates, page_of, len(awaiting), Counter(status for _, status in rows)


def best_so_far_series(run: Run) -> list[dict]:
    """One point per evaluated candidate in order (its latest evaluation), with the best kept speedup up to it.
    Read as plain rows: the chart covers every candidate of the run, the table only a page."""
    latest: dict[int, dict] = {}
    for row in (Evaluation.objects.filter(candidate__run=run)
                .order_by("candidate__number", "attempt")
                .values("candidate__number", "candidate__status", "geomean_speedup", "speedup_ci_lo", "speedup_ci_hi")):
        latest[row["candidate__number"]] = row
    points, best = [], None
    for number, row in sorted(latest.items()):
        speedup = row["geomean_speedup"]
        if speedup is None:
            continue
        status = row["candidate__status"]
        if status == Candidate.Status.KEPT:
            best = speedup if best is None else max(best, speedup)
        points.append({"number": number, "speedup": speedup, "outcome": outcome_of(status),
                       "ci_lo": row["speedup_ci_lo"], "ci_hi": row["speedup_ci_hi"], "best": best})
    return points


def run_state(run: Run, page=1) -> dict:
    candidates, page_of, awaiting, by_status = run_candidates(run, page)
    return {
        "run": run, "candidates": candidates, "page": page_of, "progress": run_progress(run, by_status),
        "awaiting": awaiting, "series": best_so_far_series(run), "cpu_mode": is_cpu_mode(run.hardware),
        "last_seq": last_seq(),
    }


def candidate_state(candidate: Candidate) -> dict:
    evaluations = list(candidate.evaluations.order_by("attempt"))  # each with its report: read once
    decisions = list(candidate.decisions.select_related("user").order_by("created", "id"))
    _attach_latest(candidate, evaluations, decisions)
    evaluation = candidate.latest_evaluation
    report = evaluation.report if evaluation else {}
    read = read_report(report) or {}  # read once; each part below takes the Report as it is
    run = candidate.run
    target = run.thesis.target
    axis = serving_axis(target)
    incumbent = run.incumbent if run.incumbent_id and run.incumbent_id != candidate.id else None
    return {
        "candidate": candidate, "run": run, "target": target, "axis": axis, "evaluation": evaluation,
        "report": report, "read": read, "shapes": benchmark_shapes(read, axis), "e2e": e2e_grid(read),
        "families": family_table(read, CATALOG[target.name].value_families if target.name in CATALOG else ()),
        "findings": guard_findings(read, candidate.source), "logs": report_logs(read),
        "timings_available": timings_available(read), "cpu_mode": is_cpu_mode(run.hardware),
        "decisions": decisions, "incumbent": incumbent, "evaluations": evaluations,
        "last_seq": last_seq(),
    }


# --- deployments ---------------------------------------------------------------------------------------

def serving_overview() -> list[ServingConfig]:
    """The config in force (the highest version) for every (target, hardware)."""
    heads = ServingConfig.objects.values("target_id", "hardware").annotate(v=Max("version"))
    wanted = Q(pk__in=[])
    for head in heads:
        wanted |= Q(target_id=head["target_id"], hardware=head["hardware"], version=head["v"])
    return list(ServingConfig.objects.filter(wanted).select_related("target", "author", "approver")
                .order_by("target__name", "hardware"))


def serving_versions(target: Target, hardware: str) -> list[ServingConfig]:
    return list(ServingConfig.objects.filter(target=target, hardware=hardware)
                .select_related("author", "approver").order_by("-version"))


# --- audit ---------------------------------------------------------------------------------------------

def audit_events(*, type: str = "", run: str = "", actor: str = "", reason: str = "", verdict: str = ""):
    events = Event.objects.all()
    if type:
        events = events.filter(type=type)
    if run.isdigit():
        events = events.filter(run_id=int(run))
    if actor:
        events = events.filter(actor=actor)
    if reason:
        events = events.filter(Q(payload__reason_code__icontains=reason) | Q(payload__reason__icontains=reason)
                               | Q(payload__reason_text__icontains=reason))
    if verdict:
        events = events.filter(Q(payload__verdict=verdict) | Q(type__icontains=verdict))
    return events.order_by("-id")


def _distinct_values(column: str) -> list[str]:
    """The distinct values of an indexed column of the audit log, in order, by stepping through its index
    from one value to the next (a loose index scan, in SQL both SQLite and PostgreSQL run): a few index probes
    per value, where SELECT DISTINCT reads the whole log, which only grows (docs/scaling.md, What grows)."""
    assert column in ("type", "actor")  # a column name, never user input
    table = connection.ops.quote_name(Event._meta.db_table)
    sql = (f"WITH RECURSIVE t(v) AS (SELECT MIN({column}) FROM {table} UNION ALL "
           f"SELECT (SELECT MIN({column}) FROM {table} WHERE {column} > t.v) FROM t WHERE t.v IS NOT NULL) "
           "SELECT v FROM t WHERE v IS NOT NULL")
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return [row[0] for row in cursor.fetchall()]


def audit_filter_choices() -> dict:
    return {"types": _distinct_values("type"), "actors": _distinct_values("actor"),
            "verdicts": Decision.Verdict.values}


def route_e2e_calls(evidence: dict | None, bounds: dict) -> dict:
    """What the e2e run behind a serving route's evidence sent through the route with these bounds, in one
    decode step per grid point (docs/keep-rule.md, What the e2e run served): {"calls", "evaluation",
    "attempt"}, or {"calls": None, "why"} when that run did not serve this route: no evidence, no counts,
    the candidate served at every shape (its boxes were never measured end to end), or the promotion cut
    its box."""
    evaluation = Evaluation.objects.filter(pk=(evidence or {}).get("evaluation")).first()
    if evaluation is None:
        return {"calls": None, "why": "its evidence names no evaluation"}
    read = read_report(evaluation.report)
    stage = read.stages.e2e if read else None
    if stage is None or not stage.route_hits:
        return {"calls": None, "why": f"the e2e run of evaluation {evaluation.pk} reported no calls per route"}
    if stage.routes is None:
        return {"calls": None, "why": f"the e2e run of evaluation {evaluation.pk} served the candidate at every "
                                      "shape, not in its boxes (measure them end to end from its regions page)"}
    row = next((r for r in stage.route_hits if r.get("bounds") == bounds), None)
    if row is None:
        return {"calls": None, "why": f"no route of the e2e run of evaluation {evaluation.pk} has these bounds "
                                      "(the promotion cut its box around an earlier route)"}
    return {"calls": row.get("calls"), "evaluation": evaluation.pk, "attempt": evaluation.attempt}
