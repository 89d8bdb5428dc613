"""Keep or revert: a pure function of a report (gpu_worker/contract.py, as JSON) and a run's policy.

A candidate is kept when every guard is clean, every verification shape is correct and it is faster than the
incumbent beyond noise (loop/policy.py's rule), or, failing that overall, when it wins at least one region of
its target's grid (loop/regions.py; docs/keep-rule.md). Everything else reverts with a reason code and one
sentence. A report that lacks what the decision needs is an `error`, never a crash. This module sits above
policy and regions: both judge with policy's rule, and the decision needs both.
"""

from __future__ import annotations

from loop.policy import (
    E2E_NOTES,
    E2E_REGRESSION,
    ERROR,
    FASTER,
    HARNESS_CODES,
    INCORRECT,
    KEEP,
    NOISE,
    READABLE_SCHEMAS,
    REASON_ERROR,
    REVERT,
    SLOWER,
    STAGE_COMPILE_ONLY,
    STAGE_ERROR,
    STAGE_FAIL,
    STAGE_PASS,
    STAGE_SKIPPED,
    STAGE_UNAVAILABLE,
    TAIL,
    UNMEASURED,
    UNMEASURED_TEXT,
    Outcome,
    ReportError,
    RunPolicy,
    benchmark_ratio,
    describe_finding,
    e2e_regressions,
    judge,
    noise_delta,
    report_benchmark_shapes,
    report_stage,
    stage_findings,
    tail_regressions,
)
from loop.regions import region_keep, report_regions


def decide(report, policy: RunPolicy) -> Outcome:
    """The policy's verdict on one report."""
    try:
        return _decide(report, policy)
    except ReportError as exc:
        return Outcome(ERROR, REASON_ERROR, f"The report cannot be judged: {exc}.")
    except (KeyError, TypeError, AttributeError, ValueError, ArithmeticError) as exc:
        return Outcome(ERROR, REASON_ERROR, f"The report cannot be judged: {type(exc).__name__}: {exc}.")


def _decide(report, policy: RunPolicy) -> Outcome:
    if not isinstance(report, dict):
        raise ReportError("it is not a JSON object")
    if report.get("schema") not in READABLE_SCHEMAS:
        raise ReportError(f"its schema is {report.get('schema')!r}, not one of {', '.join(READABLE_SCHEMAS)}")
    verdict = report.get("verdict") if isinstance(report.get("verdict"), dict) else {}
    if not report.get("stages") and verdict.get("status") == STAGE_ERROR:
        message = verdict.get("message") or ", ".join(map(str, verdict.get("reasons") or [])) or "no stages ran"
        return Outcome(ERROR, REASON_ERROR, f"The harness failed before judging the candidate: {message}.")

    guard = report_stage(report, "guard")
    if guard["status"] == STAGE_ERROR:
        return Outcome(ERROR, REASON_ERROR, "The guard stage failed to run: " + _first_message(guard) + ".")
    if guard["status"] != STAGE_PASS or stage_findings(guard):
        findings = stage_findings(guard)
        code = str(findings[0].get("code") or "unknown") if findings else "unknown"
        text = "; ".join(describe_finding(f) for f in findings) or "the guard failed without a finding"
        code = code if code.startswith("guard:") else f"guard:{code}"  # the harness's codes carry the prefix
        return Outcome(REVERT, code, f"The guard found a forbidden construct: {text}.")

    verify = report_stage(report, "verify")
    if verify["status"] == STAGE_ERROR or _harness_only(verify):
        return Outcome(ERROR, REASON_ERROR, "The verification stage failed to run: " + _first_message(verify) + ".")
    if verify["status"] == STAGE_COMPILE_ONLY:
        return Outcome(REVERT, UNMEASURED, "Compiled, but neither run nor timed on this host: verification and "
                                           f"{UNMEASURED_TEXT}.")
    failing = [s for s in verify.get("shapes") or []
               if isinstance(s, dict) and (s.get("pass") is False or s.get("status") in (STAGE_FAIL, STAGE_ERROR))]
    if verify["status"] != STAGE_PASS or failing:
        where = _shape_names(failing) or _first_message(verify)
        return Outcome(REVERT, INCORRECT, f"The candidate computes a wrong result: {where}.")

    bench = report_stage(report, "benchmark")
    if bench["status"] in (STAGE_UNAVAILABLE, STAGE_SKIPPED):
        return Outcome(REVERT, UNMEASURED,
                       f"Verified correct, but not timed: {UNMEASURED_TEXT}; nothing is kept on a CPU-mode report.")
    if bench["status"] == STAGE_FAIL and not _harness_only(bench):
        finding = next(f for f in stage_findings(bench) if not _is_harness(f))
        return Outcome(REVERT, _guard_code(finding), "The benchmark caught a shortcut: "
                       + describe_finding(finding) + ".")
    if bench["status"] != STAGE_PASS:
        return Outcome(ERROR, REASON_ERROR, "The benchmark stage did not complete: " + _first_message(bench) + ".")
    shapes = report_benchmark_shapes(report)
    delta = noise_delta(shapes, policy)
    ratio, (ratio_lo, ratio_hi) = benchmark_ratio(report)
    numbers = {"ratio": ratio, "ratio_ci95": [ratio_lo, ratio_hi], "delta": delta, "speedup": 1.0 / ratio}
    # The keep rule (docs/keep-rule.md): a correct, guard-clean candidate that wins at least one region of
    # its target's grid is kept for that region; the aggregate's loss reverts it only when it wins nowhere.
    regions = report_regions(report, policy)
    loss = None
    call = judge((ratio_lo, ratio_hi), delta=delta, what="the aggregate ratio_ci95")
    if call == SLOWER:  # policy.SLOWER_BEYOND_NOISE is the same code
        loss = Outcome(REVERT, SLOWER, f"Slower than the incumbent beyond noise: time ratio {ratio:.3f} "
                                       f"(95% CI {ratio_lo:.3f}-{ratio_hi:.3f}, delta {delta:.1%}).", numbers)
    elif call != FASTER:
        loss = Outcome(REVERT, NOISE, f"Not faster beyond noise: time ratio {ratio:.3f}, the interval's upper bound "
                                      f"{ratio_hi:.3f} is not below {1 - delta:.3f} (delta {delta:.1%}).", numbers)
    elif (tails := tail_regressions(shapes, policy)) and not policy.allow_tail_regression:
        worst = max(tails, key=lambda s: s["tail_ratio"])
        loss = Outcome(REVERT, TAIL, f"Faster on average, but its p99 is worse than the incumbent's beyond noise at "
                                     f"{len(tails)} shape(s); worst {_shape_names([worst])}: p99 ratio "
                                     f"{worst['tail_ratio']:.2f}. The run's policy does not allow a tail regression.",
                       dict(numbers, tail_shapes=len(tails)))
    if loss is not None and not (regions and regions.won):
        return loss

    e2e = report_stage(report, "e2e")
    if e2e["status"] == STAGE_ERROR or _harness_only(e2e):
        return Outcome(ERROR, REASON_ERROR, "The end-to-end stage failed to run: " + _first_message(e2e) + ".")
    if e2e["status"] == STAGE_UNAVAILABLE:
        return Outcome(REVERT, UNMEASURED, "Faster in isolation, but the end-to-end gate did not run: "
                                           f"{UNMEASURED_TEXT} with the e2e workload.", numbers)
    if e2e["status"] != STAGE_SKIPPED:
        points = e2e.get("points")
        if not isinstance(points, list):
            raise ReportError("the e2e stage has no points")
        shortcut = [f for f in stage_findings(e2e) if str(f.get("code", "")) not in E2E_NOTES and not _is_harness(f)]
        if shortcut:
            return Outcome(REVERT, _guard_code(shortcut[0]), "The end-to-end gate caught a shortcut: "
                           + describe_finding(shortcut[0]) + ".", numbers)
        if any(isinstance(p, dict) and isinstance(p.get("parity"), dict) and p["parity"].get("ok") is False
               for p in points):
            return Outcome(REVERT, INCORRECT, "End to end, the outputs differ from the default kernel's.", numbers)
        if any(isinstance(p, dict) and p.get("kernel_ran") is False for p in points):
            return Outcome(REVERT, "guard:e2e:kernel_not_seen", "End to end, the candidate's kernel was not seen "
                                                                "running.", numbers)
        worse = e2e_regressions(points, policy)
        if worse or e2e["status"] == STAGE_FAIL:
            where = ", ".join(f"batch {p.get('batch')} context {p.get('context')}" for p in worse)
            regression = Outcome(REVERT, E2E_REGRESSION, "Faster in isolation but slower end to end"
                                 + (f" at {where}." if where else ": " + _first_message(e2e) + "."), numbers)
            if not worse or not (regions and regions.won):
                return loss or regression  # the first reason in the documented order
            loss = loss or regression
    if loss is not None:
        return region_keep(regions, loss, numbers)
    return Outcome(KEEP, FASTER, f"Correct on every shape and faster: {1 / ratio:.3f}x the incumbent "
                                 f"(time ratio CI {ratio_lo:.3f}-{ratio_hi:.3f}, below {1 - delta:.3f}).", numbers)


def _guard_code(finding: dict) -> str:
    """`guard:<code>`; the harness's guard codes already carry the prefix."""
    code = str(finding.get("code") or "unknown")
    return code if code.startswith("guard:") else f"guard:{code}"


def _harness_only(stage: dict) -> bool:
    """Findings that say the harness failed, not the candidate."""
    findings = stage_findings(stage)
    return bool(findings) and all(_is_harness(f) for f in findings)


def _is_harness(finding: dict) -> bool:
    code = str(finding.get("code", ""))
    return code.startswith("harness:") or code in HARNESS_CODES


def _first_message(stage: dict) -> str:
    findings = stage_findings(stage)
    if findings:
        return describe_finding(findings[0])
    return str(stage.get("message") or stage.get("error") or f"status {stage.get('status')}")


def _shape_names(shapes: list[dict]) -> str:
    names = []
    for s in shapes[:5]:
        shape = s.get("shape")
        label = ", ".join(f"{k}={v}" for k, v in shape.items()) if isinstance(shape, dict) else str(shape)
        error = s.get("max_error") if s.get("max_error") is not None else s.get("message")
        names.append(f"{label}" + (f" ({error})" if error is not None else ""))
    more = len(shapes) - len(names)
    return "; ".join(names) + (f" and {more} more" if more > 0 else "")
