"""A route set as a dispatcher config (what the e2e gate serves) and the dispatcher's per-route hit table and
explanation: every route listed in config order with its bounds, kernel and calls, the fallback last."""

import pytest
import torch

from gpu_worker.dispatch import Dispatcher, ServingConfigError, routed_config, single_kernel_config
from tests.gpu_worker.dispatch.test_serving_config import RECORDING, kernel

SMALL_ROWS = {"bounds": {"rows": [1, 5], "n_ctx": [4096, 131073]}, "kernel": "candidate",
              "evidence": {"candidate": 7, "cells": [{"shape": {"rows": 4, "n_ctx": 32768}, "speedup": 1.6}]}}


def _call(d, rows, n_ctx):
    d(torch.randn(rows, n_ctx), torch.full((rows,), n_ctx, dtype=torch.int32), 8)


def test_a_proposed_box_set_routes_the_candidate_inside_and_counts_each_route_and_the_fallback():
    d = Dispatcher("dsa_topk")
    d.load(routed_config(target="dsa_topk", hardware="cpu", candidate_id="c9", source=RECORDING, routes=[SMALL_ROWS]))
    calls = d.kernels[0].forward.__globals__["CALLS"]
    _call(d, 2, 4096)
    _call(d, 4, 4096)
    _call(d, 8, 4096)  # rows past the box: the default, never the nearest box
    assert len(calls) == 2
    assert d.hit_table() == [
        {"route": 0, "bounds": {"rows": [1, 5], "n_ctx": [4096, 131073]}, "kernel": "c9", "calls": 2},
        {"route": None, "bounds": None, "kernel": "default", "calls": 1}]
    explained = d.explain({"rows": 3, "n_ctx": 4096})
    assert explained["route"] == 0 and explained["hits"] == 2 and explained["evidence"]["candidate"] == 7
    assert d.explain({"rows": 8, "n_ctx": 4096})["hits"] == 1


def test_a_serving_configs_routes_keep_their_own_kernels_beside_the_candidate():
    other = {"bounds": {"rows": [64, 129], "n_ctx": [4096, 262145]}, "kernel": kernel("c3")}
    d = Dispatcher("dsa_topk")
    d.load(routed_config(target="dsa_topk", hardware="cpu", candidate_id="candidate", source=RECORDING,
                         routes=[SMALL_ROWS, other]))
    assert [k.name for k in d.kernels] == ["candidate", "c3"]
    _call(d, 64, 4096)
    assert [row["calls"] for row in d.hit_table()] == [0, 1, 0]


def test_a_route_set_mixing_boxes_and_ranges_or_overlapping_is_refused():
    with pytest.raises(ValueError, match="boxes or ranges"):
        routed_config(target="dsa_topk", hardware="cpu", candidate_id="c", source=RECORDING,
                      routes=[SMALL_ROWS, {"lo": 0, "hi": None}])
    overlapping = routed_config(target="dsa_topk", hardware="cpu", candidate_id="c", source=RECORDING,
                                routes=[SMALL_ROWS, {**SMALL_ROWS, "bounds": {"rows": [4, 9], "n_ctx": [0, 5000]}}])
    with pytest.raises(ServingConfigError, match="overlap"):
        Dispatcher("dsa_topk").load(overlapping)


def test_the_single_kernel_config_is_one_unbounded_range():
    document = single_kernel_config(target="dsa_topk", hardware="cpu", candidate_id="c", source=RECORDING)
    assert document["axis"] == "n_ctx" and document["fallback"] == "default"
    assert [(r["lo"], r["hi"], r["kernel"]["candidate_id"]) for r in document["routes"]] == [(0, None, "c")]
    d = Dispatcher("dsa_topk")
    d.load(document)
    _call(d, 3, 100)
    assert d.hit_table()[0]["calls"] == 1 and d.hit_table()[0]["bounds"] == {"n_ctx": [0, None]}
