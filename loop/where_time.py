"""Where a candidate's time goes, read from its report: per shape the roofline (achieved bytes and FLOPs
against the floor) and the profiled per-kernel GPU times; per e2e point the ceiling ("attained x of a
possible y"). The candidate page shows them (console/views/runs.py) and the LLM proposer starts its next
proposal from them (loop/proposers/llm.py). Reports written before 2026-12-04 carry none: nothing is made up.
"""

from __future__ import annotations

import json

import plotly.graph_objects as go

from gpu_worker.contract import ncu_kernel_text
from loop.selectors import read_report

PROMPT_SHAPES = 4
PROMPT_KERNELS = 4


def _label(shape) -> str:
    return ", ".join(f"{k}={v}" for k, v in shape.items()) if isinstance(shape, dict) else str(shape)


def shape_profiles(report) -> list[dict]:
    """The listed shapes' roofline and per-kernel times (only shapes with a measured candidate)."""
    read = read_report(report)
    bench = read.stages.benchmark if read else None
    rows = []
    for entry in bench.shapes if bench else []:
        if entry.held_out or entry.candidate is None or entry.candidate.mean_us is None:
            continue
        profile = entry.profile or {}
        slow = profile.get("slowest_family") or {}
        rows.append({"label": _label(entry.shape), "mean_us": entry.candidate.mean_us, "floor_us": entry.floor_us,
                     "floor_fraction": entry.floor_fraction, "bytes_fraction": entry.bytes_fraction,
                     "flops_fraction": entry.flops_fraction, "bound": entry.bound,
                     "kernels": profile.get("kernels") or [], "kernel_us": profile.get("kernel_us"),
                     "family": profile.get("family"), "profile_error": profile.get("error"),
                     # a value family much slower than the others, profiled on its own input (pipeline/profile.py)
                     "slow_family": slow.get("family"), "slow_mean_us": slow.get("mean_us"),
                     "slow_kernels": slow.get("kernels") or []})
    return rows


def counters(report) -> dict | None:
    """Nsight Compute's counters at the one shape they were taken at (pipeline/ncu.py): the shape's label, its
    kernels (time, DRAM bytes and rate, percentages of peak, occupancy, L2 hits, registers) or the error;
    None where the worker had no ncu or the report predates them."""
    read = read_report(report)
    bench = read.stages.benchmark if read else None
    for entry in bench.shapes if bench else []:
        found = (entry.profile or {}).get("ncu")
        if found:
            kernels = [dict(k, dram_mb=k["dram_bytes"] / 1e6 if k.get("dram_bytes") is not None else None)
                       for k in found.get("kernels") or []]
            return {"label": _label(found.get("shape") or entry.shape), "kernels": kernels, "error": found.get("error")}
    return None


def ceiling_points(report) -> list[dict]:
    """E2E points that measured a ceiling, with their "attained x of a possible y" text."""
    read = read_report(report)
    e2e = read.stages.e2e if read else None
    rows = []
    for p in e2e.points if e2e else []:
        if p.ceiling_tok_s is None or p.ceiling_ratio is None:
            continue
        text = f"attained {p.ceiling_attained:.0%} of a possible {p.ceiling_ratio:.2f}x"
        if p.gain_attained is not None:
            text += f" ({p.gain_attained:.0%} of the possible gain)"
        rows.append({"batch": p.batch, "context": p.context, "default": p.default_tok_s,
                     "candidate": p.candidate_tok_s, "ceiling": p.ceiling_tok_s, "possible": p.ceiling_ratio,
                     "possible_ci": p.ceiling_ratio_ci95, "attained": p.ceiling_attained, "text": text})
    return rows


def kernel_chart(rows: list[dict]) -> dict | None:
    """Stacked bars: each shape's profiled GPU time per kernel, the floor marked, and beside a shape whose
    slowest value family was profiled on its own, that family's bar; None without a profile."""
    bars = []
    for r in rows:
        if r["kernels"]:
            bars.append(r)
        if r["slow_kernels"]:  # the slowest value family's own profile, as a bar beside its shape's
            bars.append(dict(r, label=f"{r['label']} ({r['slow_family']})", kernels=r["slow_kernels"]))
    rows = bars
    if not rows:
        return None
    fig = go.Figure()
    labels = [r["label"] for r in rows]
    names = []
    for r in rows:
        names += [k["name"] for k in r["kernels"] if k["name"] not in names]
    for name in names:
        fig.add_trace(go.Bar(x=labels, name=name[:48], y=[
            next((k["us"] for k in r["kernels"] if k["name"] == name), 0.0) for r in rows]))
    fig.add_trace(go.Scatter(x=labels, y=[r["floor_us"] for r in rows], mode="markers", name="floor",
                             marker={"symbol": "line-ew-open", "size": 28, "color": "#c62828",
                                     "line": {"width": 3}},
                             text=[f"{r['floor_fraction']:.0%} of the floor" if r["floor_fraction"] else ""
                                   for r in rows]))
    fig.update_layout(barmode="stack", margin={"l": 60, "r": 20, "t": 30, "b": 50}, height=340,
                      template="plotly_white", legend={"orientation": "h", "y": -0.25},
                      yaxis_title="GPU time per call (us)")
    return json.loads(fig.to_json())


def _pct(x) -> str:
    return f"{x:.0%}" if x is not None else "not measured"


def _kernels_text(kernels: list[dict]) -> str:
    return ", ".join(f"{k['name'][:60]} {k['us']:.1f} us x{k['launches']:g}" for k in kernels[:PROMPT_KERNELS])


def prompt_section(report) -> str | None:
    """A compact "where the time goes" for a proposer, from the incumbent's latest report; None without data."""
    lines = []
    for r in shape_profiles(report)[:PROMPT_SHAPES]:
        line = (f"- {r['label']}: {r['mean_us']:.1f} us mean; {_pct(r['floor_fraction'])} of the "
                f"{r['bound'] or '?'}-bound floor ({r['floor_us']:.1f} us)" if r["floor_us"] else
                f"- {r['label']}: {r['mean_us']:.1f} us mean; no floor on this hardware")
        line += f"; bytes {_pct(r['bytes_fraction'])} of peak, FLOPs {_pct(r['flops_fraction'])} of peak"
        if r["kernels"]:
            line += "; GPU kernels: " + _kernels_text(r["kernels"])
        if r["slow_kernels"]:
            line += (f"; on {r['slow_family']} values (mean {r['slow_mean_us']:.1f} us, the slowest family): "
                     + _kernels_text(r["slow_kernels"]))
        lines.append(line)
    found = counters(report)
    if found and found["kernels"]:
        lines.append(f"- Nsight Compute at {found['label']}: "
                     + "; ".join(ncu_kernel_text(k) for k in found["kernels"][:PROMPT_KERNELS]))
    for p in ceiling_points(report):
        lines.append(f"- e2e batch {p['batch']}, context {p['context']}: {p['text']}")
    return "\n".join(lines) if lines else None
