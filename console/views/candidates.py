"""How the candidate page offers promotion. A target that declares two operating axes (`grid` in
gpu_worker/target_catalog.py) is promoted from its candidate's winning-regions page only: the page shows
where the candidate wins over both axes, the routes that serve it only there and what they change against
the version in force (docs/keep-rule.md, Winning regions). A one-axis range would send every row count of
a context range to the candidate, the cells it loses included. Targets without a grid (an imported
definition, the FP8 indexer) keep the candidate page's range dialog."""

from loop.regions import analyze_candidate_grid, grid_axes

LEFT_OUT_SHOWN = 3  # cells named on the candidate page; the regions page lists them all


def region_summary(candidate, evaluation=None) -> dict | None:
    """What the candidate page says about the candidate's winning regions (from `evaluation`, its latest, where
    the caller has read it), or None when its target has no two-axis grid (then the range dialog promotes it)."""
    axes = grid_axes(candidate.run.thesis.target)
    if axes is None:
        return None
    grid = analyze_candidate_grid(candidate, baseline="default", evaluation=evaluation)
    if grid is None:
        return {"axes": axes, "analysed": False}
    left = [f"{axes[0]} {c.row} x {axes[1]} {c.col}: {'; '.join(c.reasons)}"
            for c in sorted(grid.left_out, key=lambda c: (c.row, c.col))]
    return {"axes": axes, "analysed": True, "won": len(grid.won), "cells": len(grid.cells),
            "routes": len(grid.routes), "left_out": left[:LEFT_OUT_SHOWN],
            "more_left_out": max(0, len(left) - LEFT_OUT_SHOWN)}


def one_axis_refusal(candidate) -> str | None:
    """Why the range dialog's POST may not promote this candidate (its target routes a two-axis grid), or
    None when it may."""
    axes = grid_axes(candidate.run.thesis.target)
    if axes is None:
        return None
    return (f"{candidate.run.thesis.target.name} is served over {axes[0]} x {axes[1]}: promote this candidate "
            "from its winning-regions page, which routes it only to the cells where it was measured faster.")
