"""Serving configs over two axes: boxes with explicit bounds, the default outside every box (no snapping
to the nearest box), overlaps refused, and the dispatcher explaining and counting what it routed."""

import pytest
import torch

from gpu_worker.dispatch import Dispatcher, ServingConfigError, source_hash
from tests.gpu_worker.dispatch.test_serving_config import RECORDING, kernel


def grid_config(routes, **top):
    return {"schema": "ark.serving/1", "target": "dsa_topk", "hardware": "h200", "version": 1,
            "axes": ["rows", "n_ctx"], "fallback": "default", "routes": routes, **top}


SMALL_ROWS = {"bounds": {"rows": [1, 5], "n_ctx": [4096, 131073]}, "kernel": kernel("c7"),
              "evidence": {"candidate": 7, "cells": [{"shape": {"rows": 4, "n_ctx": 32768}, "speedup": 1.6}]}}


def test_a_shape_inside_a_box_gets_its_kernel_and_every_other_shape_the_default():
    d = Dispatcher("dsa_topk")
    d.load(grid_config([SMALL_ROWS]))
    assert d.kernel_for_shape({"rows": 4, "n_ctx": 32768}).name == "c7"
    assert d.kernel_for_shape({"rows": 1, "n_ctx": 131072}).name == "c7"
    # just past each bound, and far away: the default, never the nearest box
    for shape in ({"rows": 5, "n_ctx": 32768}, {"rows": 4, "n_ctx": 131073}, {"rows": 1, "n_ctx": 4095},
                  {"rows": 128, "n_ctx": 262144}, {"rows": 0, "n_ctx": 8192}):
        assert d.kernel_for_shape(shape).name == "default", shape


def test_topk_routes_by_rows_and_n_ctx_and_counts_hits_per_route():
    d = Dispatcher("dsa_topk")
    d.load(grid_config([SMALL_ROWS]))
    calls = d.kernel_for_shape({"rows": 2, "n_ctx": 4096}).forward.__globals__["CALLS"]
    lengths = torch.full((2,), 4096, dtype=torch.int32)
    d(torch.randn(2, 4096), lengths, 16)
    d(torch.randn(8, 4096), torch.full((8,), 4096, dtype=torch.int32), 16)  # 8 rows: outside the box
    d(torch.randn(2, 5000), torch.full((2,), 5000, dtype=torch.int32), 16)
    assert len(calls) == 2 and d.route_hits == {0: 2, None: 1}
    assert d.calls == {"c7": 2, "default": 1}


def test_explain_names_the_route_its_bounds_and_evidence_or_says_the_default_serves():
    d = Dispatcher("dsa_topk")
    d.load(grid_config([SMALL_ROWS]))
    inside = d.explain({"rows": 3, "n_ctx": 50000})
    assert (inside["route"], inside["kernel"], inside["bounds"]) == (0, "c7", {"rows": [1, 5], "n_ctx": [4096, 131073]})
    assert inside["evidence"]["candidate"] == 7
    outside = d.explain({"rows": 64, "n_ctx": 50000})
    assert (outside["route"], outside["kernel"]) == (None, "default") and "default serves it" in outside["why"]


@pytest.mark.parametrize("routes, top, words", [
    ([SMALL_ROWS, {"bounds": {"rows": [4, 9], "n_ctx": [0, None]}, "kernel": "default"}], {}, ["routes overlap", "rows [1, 5)", "rows [4, 9)"]),
    ([{"bounds": {"rows": [1, 5]}, "kernel": "default"}], {}, ["'bounds' must give"]),
    ([{"bounds": {"rows": [5, 1], "n_ctx": [0, None]}, "kernel": "default"}], {}, ["rows bounds must be"]),
    ([SMALL_ROWS], {"fallback": None}, ["needs 'fallback': 'default'"]),
    ([SMALL_ROWS], {"axis": "n_ctx"}, ["not both"]),
    ([SMALL_ROWS], {"axes": ["rows", "n-ctx"]}, ["'axes' must be distinct axis names"]),
])
def test_a_bad_grid_config_is_refused_by_name_and_the_current_one_stays(routes, top, words):
    d = Dispatcher("dsa_topk")
    d.load(grid_config([SMALL_ROWS]))
    with pytest.raises(ServingConfigError) as error:
        d.load(grid_config(routes, version=2, **top))
    for word in words:
        assert word in str(error.value)
    assert d.version == 1 and d.kernel_for_shape({"rows": 2, "n_ctx": 8192}).name == "c7"


def test_the_source_hash_is_still_checked_in_a_box():
    bad = dict(SMALL_ROWS, kernel=kernel("c7", source_hash=source_hash(RECORDING + "# changed\n")))
    with pytest.raises(ServingConfigError, match="hash mismatch"):
        Dispatcher("dsa_topk").load(grid_config([bad]))
