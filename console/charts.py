"""Plotly figures as JSON-ready dicts; the page draws them with the bundled plotly.js."""

import functools
import json
import math

import plotly.graph_objects as go

COLORS = {"kept": "#1a7f37", "reverted": "#9aa3b5", "vetoed": "#c62828", "error": "#e09b00",
          "awaiting_review": "#3451b2", "in_flight": "#6b7385",
          "candidate": "#3451b2", "incumbent": "#1a7f37", "default": "#6b7385", "floor": "#c62828"}
# Figures are built on plotly's empty template ("none"; without one plotly expands its default into every
# figure) and given the expanded plotly_white template, made once, as a dict: expanding and copying the template
# was two thirds of the run page's chart (21 -> 6 ms for 55 candidates; docs/scaling.md), with the same JSON.
_LAYOUT = {"margin": {"l": 60, "r": 20, "t": 40, "b": 50}, "height": 340, "template": "none",
           "legend": {"orientation": "h", "y": -0.2}}


@functools.cache
def _template() -> str:
    return json.dumps(json.loads(go.Figure(layout={"template": "plotly_white"}).to_json())["layout"]["template"])


def _as_dict(fig: go.Figure) -> dict:
    figure = json.loads(fig.to_json())
    figure["layout"]["template"] = json.loads(_template())  # a fresh copy: callers may change their figure
    return figure


def best_so_far(series: list[dict]) -> dict:
    """Each evaluated candidate's geomean speedup over the incumbent (with its interval), coloured by
    outcome, and the best kept speedup so far as a step line."""
    fig = go.Figure()
    by_outcome: dict[str, list] = {}
    for point in series:
        by_outcome.setdefault(point["outcome"], []).append(point)
    for outcome, points in by_outcome.items():
        fig.add_trace(go.Scatter(
            x=[p["number"] for p in points], y=[p["speedup"] for p in points], mode="markers", name=outcome,
            marker={"color": COLORS.get(outcome, "#333"), "size": 8},
            error_y={"type": "data", "symmetric": False,
                         "array": [(p["ci_hi"] - p["speedup"]) if p["ci_hi"] is not None else 0 for p in points],
                         "arrayminus": [(p["speedup"] - p["ci_lo"]) if p["ci_lo"] is not None else 0 for p in points],
                         "thickness": 1},
        ))
    best = [p for p in series if p["best"] is not None]
    if best:
        fig.add_trace(go.Scatter(x=[p["number"] for p in best], y=[p["best"] for p in best], mode="lines",
                                 line={"shape": "hv", "color": COLORS["kept"], "width": 2}, name="best so far"))
    fig.add_hline(y=1.0, line={"color": "#999", "dash": "dot"})
    fig.update_layout(**_LAYOUT, xaxis_title="candidate", yaxis_title="geomean speedup over the incumbent (x)")
    fig.update_xaxes(tickformat="d", dtick=1 if len(series) <= 20 else None)
    return _as_dict(fig)


def _errors(rows, name):
    plus = [(r[name][2] - r[name][0]) if r[name][2] is not None and r[name][0] is not None else 0 for r in rows]
    minus = [(r[name][0] - r[name][1]) if r[name][1] is not None and r[name][0] is not None else 0 for r in rows]
    return {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus, "thickness": 1.2}


def per_shape(rows: list[dict], *, axis: str | None, crossovers: list[dict] | None = None) -> dict:
    """Median time per shape for candidate, incumbent and default kernel with their intervals, the floor
    (the least time the bytes or FLOPs allow) dashed, and the crossovers from range analysis marked."""
    numeric = all(isinstance(r["x"], (int, float)) for r in rows) and rows
    ordered = sorted(rows, key=lambda r: r["x"]) if numeric else rows
    xs = [r["x"] for r in ordered] if numeric else [r["label"] for r in ordered]
    labels = [r["label"] for r in ordered]
    # Several shapes at one axis value (other rows, batch...): points only, a line would zigzag between them.
    mode = "lines+markers" if len(set(map(str, xs))) == len(xs) else "markers"
    fig = go.Figure()
    for name in ("default", "incumbent", "candidate"):
        ys = [r[name][0] for r in ordered]
        if all(y is None for y in ys):
            continue
        fig.add_trace(go.Scatter(x=xs, y=ys, name=name, mode=mode, text=labels,
                                 marker={"color": COLORS[name]}, line={"color": COLORS[name]},
                                 error_y=_errors(ordered, name), hovertemplate="%{text}<br>%{y:.2f} us"))
    floors = [r["floor_us"] for r in ordered]
    if any(f is not None for f in floors):
        fig.add_trace(go.Scatter(x=xs, y=floors, name="floor", mode="lines" if mode != "markers" else "markers",
                                 marker={"symbol": "line-ew-open", "size": 14, "color": COLORS["floor"]},
                                 line={"color": COLORS["floor"], "dash": "dash"}))
    log_x = bool(numeric and len(xs) > 1 and min(xs) > 0 and max(xs) / min(xs) > 20)
    for crossover in (crossovers or []) if numeric else []:
        fig.add_vline(x=crossover["at"], line={"color": "#e09b00", "dash": "dot"})
        # Annotations on a log axis take log10 of the position (plotly's convention); shapes do not.
        fig.add_annotation(x=math.log10(crossover["at"]) if log_x else crossover["at"], y=1, yref="paper",
                           text=f"crossover {crossover['at']}", showarrow=False, xanchor="left", yanchor="bottom",
                           font={"color": "#b07400"})
    fig.update_layout(**_LAYOUT, yaxis_title="median time (us)", xaxis_title=axis or "shape")
    if log_x:
        fig.update_xaxes(type="log")
    return _as_dict(fig)


def waterfall(data: dict) -> dict:
    """Tokens per second of each serving-config version over the e2e grid (loop/impact.py): the default's
    level, then one step per version; a version whose kernels were not all measured end to end is a grey
    zero step labelled "not measured". The ceiling is drawn where one is known."""
    steps, base = data.get("steps") or [], data.get("base")
    if not steps or not base:
        return {}
    labels = ["default"] + [f"v{s['version']}" + (f" (rollback to v{s['rolled_back_to']})" if s["rolled_back_to"] else "")
                            for s in steps]
    texts = [f"{base:,.0f} tok/s"] + [("not measured" if s["gain"] is None else f"{s['gain']:+,.0f}") for s in steps]
    fig = go.Figure(go.Waterfall(
        x=labels, y=[base] + [s["gain"] or 0.0 for s in steps], text=texts, textposition="outside",
        measure=["absolute"] + ["relative"] * len(steps), connector={"line": {"color": "#bbb"}},
        increasing={"marker": {"color": COLORS["kept"]}}, decreasing={"marker": {"color": COLORS["vetoed"]}},
        totals={"marker": {"color": COLORS["candidate"]}},
    ))
    levels = [base] + [s["level"] for s in steps if s["level"] is not None]
    ceiling = data.get("ceiling")
    if ceiling:
        fig.add_hline(y=ceiling, line={"color": COLORS["floor"], "dash": "dash"}, annotation_text="zero-cost ceiling")
    top = max(levels + ([ceiling] if ceiling else []))
    # Gains are a few percent of the base: start the axis near the lowest level so that they show.
    fig.update_layout(**_LAYOUT, yaxis_title=f"tokens/s ({data.get('weighted_by', '')})", showlegend=False,
                      yaxis={"range": [min(levels) * 0.97, top * 1.03]})
    return _as_dict(fig)


def region_heatmap(grid: dict, impact: dict | None = None) -> dict:
    """Speedup per cell of the two operating axes (log2 colour, 1x white), the interval and the reason
    on hover, unmeasured cells blank, and the cells the promotion would give a new owner outlined."""
    rows, cols = grid["rows"], grid["cols"]
    a, b = grid["axes"]
    cells = {(c["shape"][a], c["shape"][b]): c for c in grid["cells"]}
    owners = {(c["shape"][a], c["shape"][b]): c for c in (impact or {}).get("cells", [])}
    z, text, hover = [], [], []
    for r in rows:
        z_row, t_row, h_row = [], [], []
        for c in cols:
            cell = cells.get((r, c))
            if cell is None:
                z_row.append(None), t_row.append(""), h_row.append(f"{a} {r} x {b} {c}: not measured")
                continue
            speedup, (lo, hi) = 1 / cell["ratio"], cell["ci95"]
            z_row.append(math.log2(speedup))
            t_row.append(f"{speedup:.2f}x")
            owner = owners.get((r, c))
            h_row.append(f"{a} {r} x {b} {c}<br>{speedup:.2f}x (95% CI {1 / hi:.2f}-{1 / lo:.2f})<br>{cell['status']}"
                         + (f": {'; '.join(cell['reasons'])}" if cell["reasons"] else "")
                         + (f"<br>served now by {owner['now']}, after: {owner['new']}" if owner else ""))
        z.append(z_row), text.append(t_row), hover.append(h_row)
    reach = max([abs(v) for row in z for v in row if v is not None] + [0.5])
    fig = go.Figure(go.Heatmap(
        x=[str(c) for c in cols], y=[str(r) for r in rows], z=z, text=text, texttemplate="%{text}",
        customdata=hover, hovertemplate="%{customdata}<extra></extra>", colorscale="RdBu", zmin=-reach, zmax=reach,
        zmid=0, colorbar={"title": "speedup", "tickvals": [-2, -1, 0, 1, 2], "ticktext": ["0.25x", "0.5x", "1x", "2x", "4x"]},
        xgap=2, ygap=2))
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            if owners.get((r, c), {}).get("changes"):
                fig.add_shape(type="rect", x0=j - 0.5, x1=j + 0.5, y0=i - 0.5, y1=i + 0.5,
                              line={"color": "#111", "width": 3})
    fig.update_layout(**{**_LAYOUT, "height": 120 + 48 * len(rows)}, xaxis_title=b, yaxis_title=a)
    fig.update_xaxes(type="category")
    fig.update_yaxes(type="category")
    return _as_dict(fig)


_BOX_FIELDS = ("min_us", "q1_us", "median_us", "q3_us", "max_us")


def _measured_distribution(timing) -> bool:
    return isinstance(timing, dict) and all(isinstance(timing.get(f), (int, float)) for f in _BOX_FIELDS)


def _means(timings: list[dict]) -> dict:
    """The dashed mean line, only where every shape measured one: given no mean, plotly would invent one."""
    if any(not isinstance(t.get("mean_us"), (int, float)) for t in timings):
        return {}
    return {"mean": [t["mean_us"] for t in timings], "boxmean": True}


def distribution(entries: list[dict], labels: list[str]) -> dict | None:
    """One box per kernel (candidate, incumbent, default) at each benchmark shape, drawn from the
    quartiles the report carries: the box spans q1..q3, the whiskers min..max, the dashed line is the mean,
    and a tick marks the p99. None when no shape has them (reports converted from ark.report/1 measured
    only the median and its interval, so there is no distribution to draw)."""
    kernels = {name: [(label, entry[name]) for entry, label in zip(entries, labels)
                      if _measured_distribution(entry.get(name))] for name in ("candidate", "incumbent", "default")}
    if not any(kernels.values()):
        return None  # before making a figure: an empty plotly figure alone costs a few ms of a candidate page
    fig = go.Figure()
    for name, measured in kernels.items():
        if not measured:
            continue
        xs = [label for label, _ in measured]
        timings = [timing for _, timing in measured]
        fig.add_trace(go.Box(
            x=xs, name=name, marker={"color": COLORS[name]}, offsetgroup=name,
            lowerfence=[t["min_us"] for t in timings], q1=[t["q1_us"] for t in timings],
            median=[t["median_us"] for t in timings], q3=[t["q3_us"] for t in timings],
            upperfence=[t["max_us"] for t in timings], **_means(timings),
        ))
        tails = [(x, t["p99_us"]) for x, t in zip(xs, timings) if t.get("p99_us") is not None]
        if tails:
            fig.add_trace(go.Scatter(
                x=[x for x, _ in tails], y=[y for _, y in tails], mode="markers", name=f"{name} p99",
                offsetgroup=name, marker={"symbol": "line-ew-open", "size": 14, "color": COLORS[name]},
                hovertemplate="%{x}<br>p99 %{y:.2f} us", showlegend=False))
    lows = [v for trace in fig.data if trace.type == "box" for v in trace.lowerfence]
    highs = [v for trace in fig.data if trace.type == "box" for v in trace.upperfence]
    fig.update_layout(**_LAYOUT, boxmode="group", scattermode="group", xaxis_title="shape",
                      yaxis_title="time per call (us)")
    # Shapes from a few microseconds to milliseconds: a log axis keeps the small ones' boxes visible.
    if min(lows) > 0 and max(highs) / min(lows) > 20:
        fig.update_yaxes(type="log")
    return _as_dict(fig)
