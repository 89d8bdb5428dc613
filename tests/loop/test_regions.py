"""Winning regions over rows x n_ctx: cells judged by the one noise rule, routes as boxes with explicit
bounds, nothing extrapolated or snapped (docs/keep-rule.md, Winning regions)."""

import pytest

from loop.policy import RunPolicy
from loop.regions import CANDIDATE, DEFAULT, LOSE, TIE, WIN, analyze_grid
from tests.loop.reports import e2e_point, report, shape_result

AXES = ("rows", "n_ctx")


def small_rows_report(points=None, **kw):
    """Faster (0.6) at 1 and 4 rows, 7x slower at 64 and 128 rows, over three context lengths."""
    shapes = [shape_result(r, n, 0.6 if r <= 4 else 7.0) for r in (1, 4, 64, 128) for n in (4096, 32768, 131072)]
    return report(shapes=shapes, points=points if points is not None else [], **kw)


def test_a_candidate_that_wins_only_at_small_rows_gets_one_box_over_those_rows_and_the_contexts_measured():
    grid = analyze_grid(small_rows_report(), axes=AXES)
    assert {(c.row, c.col): c.status for c in grid.cells.values()} == {
        (r, n): WIN if r <= 4 else LOSE for r in (1, 4, 64, 128) for n in (4096, 32768, 131072)}
    assert list(grid.routes) == [{"bounds": {"rows": [1, 5], "n_ctx": [4096, 131073]}, "kernel": CANDIDATE}]
    assert grid.cells[(64, 4096)].reasons == ("slower on the benchmark: 0.14x",)
    # inside the box (between measured cells that all won) the candidate serves; past it, the default
    assert grid.owner({"rows": 3, "n_ctx": 50000}) == CANDIDATE
    assert grid.owner({"rows": 5, "n_ctx": 4096}) == DEFAULT  # between a win (4) and a loss (64): no snapping
    assert grid.owner({"rows": 2, "n_ctx": 262144}) == DEFAULT  # past the last measured context
    assert grid.owner({"rows": 2, "n_ctx": 2048}) == DEFAULT  # below the first


def test_a_tie_is_left_out_and_splits_the_box_around_it():
    shapes = [shape_result(r, n, 0.99 if (r, n) == (4, 32768) else 0.6) for r in (1, 4) for n in (4096, 32768, 131072)]
    grid = analyze_grid(report(shapes=shapes, points=[]), axes=AXES)
    assert grid.cells[(4, 32768)].status == TIE and grid.cells[(4, 32768)].reasons[0].startswith("within noise")
    assert grid.owner({"rows": 4, "n_ctx": 32768}) == DEFAULT
    assert grid.owner({"rows": 2, "n_ctx": 20000}) == DEFAULT  # its space touches the tie
    assert grid.owner({"rows": 1, "n_ctx": 20000}) == CANDIDATE  # along rows = 1 both ends won
    assert grid.owner({"rows": 4, "n_ctx": 4096}) == CANDIDATE
    boxes = [r["bounds"] for r in grid.routes]
    for a in range(len(boxes)):  # boxes never overlap
        for b in range(a + 1, len(boxes)):
            assert not all(boxes[a][ax][0] < boxes[b][ax][1] and boxes[b][ax][0] < boxes[a][ax][1] for ax in AXES)


def test_an_e2e_loss_vetoes_the_cells_it_lies_on_or_between_and_says_so():
    points = [e2e_point(4, 32768, 0.90), e2e_point(1, 4096, 1.0)]
    grid = analyze_grid(small_rows_report(points=points), axes=AXES)
    assert grid.cells[(4, 32768)].status == LOSE
    assert grid.cells[(4, 32768)].reasons == ("slower end to end at batch 4, context 32768",)
    assert grid.cells[(1, 32768)].status == WIN  # a tie end to end (batch 1) vetoes nothing
    between = analyze_grid(small_rows_report(points=[e2e_point(2, 60000, 0.9)]), axes=AXES)
    assert {k for k, c in between.cells.items() if c.status == LOSE and k[0] <= 4} == {
        (1, 32768), (1, 131072), (4, 32768), (4, 131072)}


def test_a_p99_slower_beyond_noise_loses_the_cell_unless_the_run_allows_it():
    shapes = [shape_result(1, 4096, 0.6), shape_result(4, 4096, 0.6)]
    shapes[1].update(tail_ratio=1.5, tail_ratio_ci95=[1.4, 1.6])
    assert analyze_grid(report(shapes=shapes, points=[]), axes=AXES).cells[(4, 4096)].status == LOSE
    allowed = analyze_grid(report(shapes=shapes, points=[]), axes=AXES, policy=RunPolicy(allow_tail_regression=True))
    assert allowed.cells[(4, 4096)].status == WIN


def test_noise_wider_than_the_gain_is_a_tie_by_the_same_rule_as_the_policy():
    noisy = analyze_grid(report(shapes=[shape_result(1, 4096, 0.9, noise=0.1)], points=[]), axes=AXES)
    assert noisy.cells[(1, 4096)].status == TIE and noisy.routes == ()


def test_a_report_without_an_axis_is_refused_by_name():
    with pytest.raises(ValueError, match="hidden"):
        analyze_grid(small_rows_report(), axes=("rows", "hidden"))


def served_report(small_ratio=0.6, e2e_small=(1.10, 1.08)):
    """small_rows_report with e2e points: faster end to end at batch 1 and 4, slower at 64 (the kernel is
    7x slower there). `small_ratio`: the candidate's time ratio at 1 and 4 rows."""
    shapes = [shape_result(r, n, small_ratio if r <= 4 else 7.0) for r in (1, 4, 64, 128) for n in (4096, 32768, 131072)]
    points = [e2e_point(1, 4096, e2e_small[0]), e2e_point(4, 32768, e2e_small[1]), e2e_point(64, 131072, 0.5)]
    return report(shapes=shapes, points=points)
