"""Independent re-timing before promotion (docs/interop.md): does a second timer, in a fresh process, see the
speed-up the benchmark recorded? Standard library only: the loop judges with it, the worker measures.

Two timers measure differently (FlashInfer-Bench's clones inputs and flushes the L2 before every call; ark
replays CUDA graphs), so absolute times are not compared. What must agree is the candidate's time over the
default kernel's on each shape, both timed by the same independent timer, against the same ratio in the
report. A re-timed ratio worse than the recorded one beyond noise (the benchmark's own A/A noise, at least
MIN_TOLERANCE) is `bench:unconfirmed`. A re-timed ratio better than recorded is no reason to block.
"""

from __future__ import annotations

MIN_TOLERANCE = 0.10  # two timers of one kernel on one H200 agree within a few percent; 10% is well outside
NOT_ON_CPU = "not confirmable on cpu"


def recorded_ratio(shape: dict) -> float | None:
    """Candidate over default time of one benchmark shape of a report (the mean when measured, else the
    median of a converted /1 report)."""
    if shape.get("default_ratio") is not None:
        return float(shape["default_ratio"])
    cand = (shape.get("candidate") or {}).get("median_us")
    default = shape.get("default_median_us")
    return cand / default if cand and default else None


def confirm(report: dict, retimed: dict) -> dict:
    """report: the candidate's evaluation report; retimed: what `python -m gpu_worker.fib retime` answered
    ({"status": "measured"|"unavailable", "reason", "timer", "shapes": [{"shape", "candidate_us",
    "default_us"}]}). Returns {"status": "confirmed"|"unconfirmed"|"unavailable", "findings", "shapes"}."""
    if retimed.get("status") != "measured":
        return {"status": "unavailable", "reason": retimed.get("reason") or NOT_ON_CPU, "findings": [], "shapes": []}
    recorded = {_key(s["shape"]): s for s in ((report.get("stages") or {}).get("benchmark") or {}).get("shapes") or []}
    findings, rows = [], []
    for i, r in enumerate(retimed.get("shapes") or []):
        rec = recorded.get(_key(r["shape"]))
        claimed = recorded_ratio(rec) if rec else None
        if claimed is None or not r.get("candidate_us") or not r.get("default_us"):
            findings.append({"code": "bench:unconfirmed", "shape_index": i,
                             "message": f"{r['shape']}: no recorded and re-timed ratio to compare"})
            continue
        seen = r["candidate_us"] / r["default_us"]
        tol = max(MIN_TOLERANCE, 2.0 * float(rec.get("noise_aa") or 0.0))
        rows.append({"shape": r["shape"], "recorded_ratio": claimed, "retimed_ratio": seen, "tolerance": tol})
        if seen > claimed * (1.0 + tol):
            findings.append({"code": "bench:unconfirmed", "shape_index": i, "message": (
                f"{r['shape']}: the report says {claimed:.3f}x the default's time, {retimed.get('timer')} "
                f"measured {seen:.3f}x (beyond {100 * tol:.0f}% noise)")})
    if not rows and not findings:
        findings.append({"code": "bench:unconfirmed", "message": "nothing was re-timed"})
    return {"status": "unconfirmed" if findings else "confirmed", "findings": findings, "shapes": rows,
            "timer": retimed.get("timer")}


def promotion_allowed(confirmation: dict | None, *, on_gpu: bool) -> tuple[bool, str]:
    """The policy: a promotion of GPU measurements needs a confirmed re-timing. On a CPU deployment nothing
    was timed, so nothing can be confirmed or inflated: the promotion goes ahead and says so."""
    if confirmation is None:
        return (False, "bench:unconfirmed: no independent re-timing") if on_gpu else (True, NOT_ON_CPU)
    status = confirmation.get("status")
    if status == "confirmed":
        return True, "re-timing confirmed the recorded speed-up"
    if status == "unavailable":
        if on_gpu:
            return False, f"bench:unconfirmed: re-timing unavailable ({confirmation.get('reason')})"
        return True, NOT_ON_CPU
    first = (confirmation.get("findings") or [{}])[0].get("message", "")
    return False, f"bench:unconfirmed: {first}"


def _key(shape: dict) -> tuple:
    return tuple(sorted((k, v) for k, v in shape.items() if k != "values"))
