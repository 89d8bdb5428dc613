"""A serving config for a message-size axis from range-analysis routes (loop/ranges.py's JSON).

loop.ranges.analyze extends a candidate's first winning range down to 0 and its last one up to
infinity, past what was measured. For an all-reduce that means messages under 1 KB (never timed)
would go to the candidate; `clamp_routes` keeps the candidate inside the measured range and sends
everything else to the default (NCCL).
"""

from __future__ import annotations

import hashlib
import math

MESSAGE_AXIS = "bytes"


def clamp_routes(routes: list[dict], lo: int, hi: int) -> list[dict]:
    """Half-open routes covering [0, inf): the candidate only inside [lo, hi] (hi the largest value
    measured, inclusive), the default elsewhere; adjacent routes of the same kernel merged."""
    pieces = []
    for r in routes:
        if r["kernel"] != "candidate":
            continue
        a = max(r["lo"], lo)
        b = min(math.inf if r["hi"] is None else r["hi"], hi + 1)
        if a < b:
            pieces.append((a, b))
    out, at = [], 0
    for a, b in sorted(pieces):
        if a > at:
            out.append({"lo": at, "hi": a, "kernel": "default"})
        out.append({"lo": a, "hi": int(b), "kernel": "candidate"})
        at = int(b)
    out.append({"lo": at, "hi": None, "kernel": "default"})
    merged = []
    for r in out:
        if merged and merged[-1]["kernel"] == r["kernel"] and merged[-1]["hi"] == r["lo"]:
            merged[-1]["hi"] = r["hi"]
        else:
            merged.append(dict(r))
    return merged


def serving_config(routes: list[dict], *, target: str, hardware: str, version: int, candidate_id: str,
                   source: str, params: dict | None = None) -> dict:
    """`ark.serving/1` with axis "bytes"; the candidate's source inline with its hash."""
    kernel = {"candidate_id": candidate_id, "params": dict(params or {}), "source": source,
              "source_hash": "sha256:" + hashlib.sha256(source.encode("utf-8")).hexdigest()}
    return {"schema": "ark.serving/1", "target": target, "hardware": hardware, "version": version,
            "axis": MESSAGE_AXIS, "fallback": "default",
            "routes": [{"lo": r["lo"], "hi": r["hi"], "kernel": kernel if r["kernel"] == "candidate" else "default"}
                       for r in routes]}
