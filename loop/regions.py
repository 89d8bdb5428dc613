"""Winning regions over a target's two operating axes (docs/keep-rule.md, Winning regions).

The grid is the benchmark's measured cells: each distinct (row axis, column axis) pair of a report's
timed shapes, e.g. rows x n_ctx for dsa_topk. A cell is
  win  - every benchmark shape there is faster beyond noise by the policy's one rule (`loop.policy`),
         its p99 is not slower beyond noise (unless the run allows it), and no e2e point at or next to
         it is slower beyond noise;
  lose - a shape there is slower (time ratio >= 1), its p99 is, or an e2e point vetoes it;
  tie  - faster, but not beyond noise.
The candidate's routes are boxes with explicit bounds on both axes: a measured winning cell, and the
space between winning cells when every corner of that space was measured and won. A shape outside every
box goes to the default; nothing is extrapolated past the last measured value or snapped to the nearest
cell (docs/domain.md, Range analysis and promotion).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from gpu_worker.target_catalog import CATALOG
from loop.policy import (
    FASTER,
    KEEP,
    REGION,
    SLOWER_BEYOND_NOISE,
    Outcome,
    RunPolicy,
    aa_interval,
    e2e_judgement,
    judge,
    noise_floor,
)
from loop.ranges import baseline_ratio

WIN, LOSE, TIE = "win", "lose", "tie"
CANDIDATE, DEFAULT = "candidate", "default"
# How an e2e grid point (a decoding model's batch and context) lands on a target's kernel grid.
E2E_AXES = {"dsa_topk": {"batch": "rows", "context": "n_ctx"},
            "dsa_indexer_topk": {"batch": "rows", "context": "n_ctx"},
            "add_rmsnorm": {"batch": "tokens"}}


@dataclass(frozen=True)
class Cell:
    row: int
    col: int
    status: str
    ratio: float  # the worst candidate / baseline time ratio of the shapes in the cell
    ci95: tuple[float, float]
    reasons: tuple[str, ...]  # why it is not won; empty for a win

    @property
    def speedup(self) -> float:
        return 1.0 / self.ratio


@dataclass(frozen=True)
class GridAnalysis:
    axes: tuple[str, str]
    rows: tuple[int, ...]
    cols: tuple[int, ...]
    cells: dict  # (row, col) -> Cell
    routes: tuple[dict, ...]  # the candidate's boxes: {"bounds": {axis: [lo, hi]}, "kernel": "candidate"}

    @property
    def won(self) -> list[Cell]:
        return [c for c in self.cells.values() if c.status == WIN]

    @property
    def left_out(self) -> list[Cell]:
        return [c for c in self.cells.values() if c.status != WIN]

    def owner(self, shape: dict) -> str:
        """Who serves `shape` under the proposed routes: CANDIDATE inside a box, DEFAULT elsewhere."""
        return CANDIDATE if any(in_bounds(r["bounds"], shape) for r in self.routes) else DEFAULT

    def to_json(self) -> dict:
        return {"axes": list(self.axes), "rows": list(self.rows), "cols": list(self.cols),
                "cells": [{"shape": {self.axes[0]: c.row, self.axes[1]: c.col}, "status": c.status,
                           "ratio": c.ratio, "speedup": c.speedup, "ci95": list(c.ci95), "reasons": list(c.reasons)}
                          for c in sorted(self.cells.values(), key=lambda c: (c.row, c.col))],
                "routes": list(self.routes)}


def in_bounds(bounds: dict, shape: dict) -> bool:
    """Half-open [lo, hi) on every bounded axis; hi None is unbounded; an axis the shape lacks never matches."""
    for axis, (lo, hi) in bounds.items():
        value = shape.get(axis)
        if value is None or value < lo or (hi is not None and value >= hi):
            return False
    return True


def _shape_status(shape: dict, i: int, baseline: str, policy: RunPolicy):
    ratio, ci = baseline_ratio(shape, baseline, f"benchmark shape {i}")
    delta = noise_floor(aa_interval(shape), policy, f"benchmark shape {i} aa_ci95")
    if judge(ci, delta=delta, what=f"benchmark shape {i} ratio_ci95") == FASTER:
        status, reason = WIN, None
    elif ratio >= 1.0:
        status, reason = LOSE, f"slower on the benchmark: {1 / ratio:.2f}x"
    else:
        status, reason = TIE, f"within noise: {1 / ratio:.2f}x, interval {ci[0]:.3f}-{ci[1]:.3f} not below {1 - delta:.3f}"
    tail = shape.get("tail_ratio_ci95")
    if (tail is not None and not policy.allow_tail_regression
            and judge(tail, aa_interval(shape), policy, f"benchmark shape {i} tail_ratio_ci95") == SLOWER_BEYOND_NOISE):
        status, reason = LOSE, f"p99 slower beyond noise: tail ratio {shape.get('tail_ratio', float('nan')):.2f}"
    return status, ratio, ci, reason


def _near(values: tuple[int, ...], value: int) -> list[int]:
    """The measured values a point at `value` lies on or between (one side past either end)."""
    if value in values:
        return [value]
    below = [v for v in values if v < value]
    above = [v for v in values if v > value]
    return ([below[-1]] if below else []) + ([above[0]] if above else [])


def analyze_grid(report: dict, *, axes: tuple[str, str], policy: RunPolicy | None = None,
                 baseline: str = "incumbent", e2e_axes: dict | None = None) -> GridAnalysis:
    """The cells of a report's benchmark over `axes` and the candidate's routes (module docstring)."""
    policy = policy or RunPolicy()
    stages = report.get("stages") or {}
    entries: dict[tuple[int, int], list] = {}
    for i, shape in enumerate((stages.get("benchmark") or {}).get("shapes") or []):
        if shape.get("held_out"):
            continue  # drawn per run for the generalisation gap: not a cell of the serving grid
        dims = shape.get("shape") or {}
        if any(axis not in dims for axis in axes):
            raise ValueError(f"benchmark shape {i} has no {' or '.join(a for a in axes if a not in dims)}")
        entries.setdefault((int(dims[axes[0]]), int(dims[axes[1]])), []).append(
            _shape_status(shape, i, baseline, policy))
    if not entries:
        raise ValueError("no timed benchmark shapes to analyse")
    rows = tuple(sorted({r for r, _ in entries}))
    cols = tuple(sorted({c for _, c in entries}))
    vetoes: dict[tuple[int, int], list[str]] = {}
    e2e_axes = e2e_axes if e2e_axes is not None else E2E_AXES.get(report.get("target"), {})
    for i, point in enumerate((stages.get("e2e") or {}).get("points") or []):
        if not isinstance(point, dict) or e2e_judgement(point, policy, f"e2e point {i}") != SLOWER_BEYOND_NOISE:
            continue
        on = {grid: point.get(e2e) for e2e, grid in e2e_axes.items() if point.get(e2e) is not None}
        near = [_near(values, on[axis]) if axis in on else list(values) for axis, values in zip(axes, (rows, cols))]
        where = ", ".join(f"{k} {point.get(k)}" for k in ("batch", "context") if point.get(k) is not None)
        for key in itertools.product(*near):
            vetoes.setdefault(key, []).append(f"slower end to end at {where}")
    cells = {}
    for key, found in entries.items():
        statuses = {s for s, *_ in found}
        status = LOSE if LOSE in statuses or key in vetoes else (TIE if TIE in statuses else WIN)
        worst = max(found, key=lambda e: e[1])
        reasons = tuple(dict.fromkeys([e[3] for e in found if e[3]] + vetoes.get(key, [])))
        cells[key] = Cell(key[0], key[1], status, worst[1], tuple(worst[2]), reasons)
    return GridAnalysis(tuple(axes), rows, cols, cells, tuple(_boxes(axes, rows, cols, cells)))


def _pieces(values: tuple[int, ...]) -> list[tuple[int, int | None, tuple[int, ...]]]:
    """The axis cut at its measured values: [v, v+1) for each, and the gap between neighbours, each with
    the measured values at its ends."""
    out = []
    for i, v in enumerate(values):
        out.append((v, v + 1, (v,)))
        if i + 1 < len(values) and values[i + 1] > v + 1:
            out.append((v + 1, values[i + 1], (v, values[i + 1])))
    return out


def join_adjacent(pieces) -> list[tuple]:
    """(lo, hi, payload) pieces in order; a piece that starts where the one before ends, with an equal payload,
    extends it (the regions' boxes and a deployment's routes are both made of such runs)."""
    joined: list[list] = []
    for lo, hi, payload in pieces:
        if joined and joined[-1][1] == lo and joined[-1][2] == payload:
            joined[-1][1] = hi
        else:
            joined.append([lo, hi, payload])
    return [tuple(piece) for piece in joined]


def _boxes(axes, rows, cols, cells) -> list[dict]:
    def owned(row_ends, col_ends):
        return all(cells.get((r, c)) is not None and cells[(r, c)].status == WIN for r in row_ends for c in col_ends)

    runs_by_row = []  # per row piece: the column runs it owns
    for r_lo, r_hi, r_ends in _pieces(rows):
        runs = [(c_lo, c_hi) for c_lo, c_hi, _ in join_adjacent(
            (c_lo, c_hi, None) for c_lo, c_hi, c_ends in _pieces(cols) if owned(r_ends, c_ends))]
        runs_by_row.append((r_lo, r_hi, runs))
    return [{"bounds": {axes[0]: [r_lo, r_hi], axes[1]: list(run)}, "kernel": CANDIDATE}
            for r_lo, r_hi, runs in join_adjacent(runs_by_row) for run in runs]


def grid_axes(target) -> tuple[str, str] | None:
    """The target's operating grid from the catalog (gpu_worker/target_catalog.py); None when it has none."""
    info = CATALOG.get(getattr(target, "name", target))
    return tuple(info.grid) if info is not None and len(info.grid) == 2 else None


def analyze_candidate_grid(candidate, *, baseline: str = "incumbent", evaluation=None) -> GridAnalysis | None:
    """The grid analysis of a candidate's latest evaluation (read here unless the caller has it) under its run's
    policy; None when it was never timed, its target has no grid, or its report lacks an axis."""
    if evaluation is None:
        evaluation = candidate.evaluations.order_by("-attempt").first()
    axes = grid_axes(candidate.run.thesis.target)
    if evaluation is None or axes is None:
        return None
    try:
        return analyze_grid(evaluation.report, axes=axes, policy=RunPolicy.from_json(candidate.run.policy),
                            baseline=baseline)
    except (ValueError, TypeError, KeyError):
        return None


def report_regions(report: dict, policy: RunPolicy) -> GridAnalysis | None:
    """The report's grid analysis when its target has a grid (for the keep rule); None otherwise."""
    axes = grid_axes(report.get("target"))
    if axes is None:
        return None
    try:
        return analyze_grid(report, axes=axes, policy=policy)
    except ValueError:
        return None


def region_keep(regions: GridAnalysis, loss: Outcome, numbers: dict) -> Outcome:
    """The keep rule's `region` verdict (docs/keep-rule.md): kept for the cells it wins, the cells left
    out and why in its sentence, the overall loss in its numbers."""
    won, cells = len(regions.won), len(regions.cells)
    a, b = regions.axes
    left = "; ".join(f"{a} {c.row} x {b} {c.col}: {', '.join(c.reasons)}" for c in regions.left_out[:4])
    more = f" and {len(regions.left_out) - 4} more" if len(regions.left_out) > 4 else ""
    return Outcome(KEEP, REGION, f"Kept for the region it wins: faster beyond noise at {won} of {cells} cells "
                                 f"of {a} x {b}. Left out of its routes: {left}{more}. Over the whole grid: "
                                 f"{loss.reason_text}",
                   dict(numbers, cells_won=won, cells=cells, overall=loss.reason_code))
