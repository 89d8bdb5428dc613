import json

import pytest
import torch

from gpu_worker.dispatch import Dispatcher, ServingConfigError, default_topk, source_hash

RECORDING = """
from gpu_worker.dispatch import default_topk

PARAMS = {"tag": "base"}
CALLS = []


def forward(logits, lengths, k):
    CALLS.append((logits.shape[1], PARAMS["tag"]))
    return default_topk(logits, lengths, k)
"""


def kernel(cid="c1", source=RECORDING, **extra):
    return {"candidate_id": cid, "source_hash": source_hash(source), "params": {}, "source": source, **extra}


def config(routes, **top):
    return {
        "schema": "ark.serving/1",
        "target": "dsa_topk",
        "hardware": "h200",
        "version": 1,
        "axis": "n_ctx",
        "fallback": "default",
        "routes": routes,
        **top,
    }


@pytest.fixture
def served():
    """A dispatcher holding a good version 1: [0, 100) -> c1, the rest default."""
    d = Dispatcher("dsa_topk")
    d.load(config([{"lo": 0, "hi": 100, "kernel": kernel()}]))
    return d


def assert_refused_and_kept(served, bad, words, **kw):
    with pytest.raises(ServingConfigError) as err:
        served.load(bad, **kw)
    for word in words:
        assert word in str(err.value)
    assert served.version == 1
    assert served.kernel_for(50).name == "c1"
    assert served.kernel_for(100).name == "default"


def test_it_refuses_overlapping_routes_and_keeps_the_previous_config(served):
    bad = config(
        [{"lo": 0, "hi": 200, "kernel": kernel()}, {"lo": 150, "hi": None, "kernel": "default"}], version=2
    )
    assert_refused_and_kept(served, bad, ["routes overlap", "[0, 200)", "[150, inf)"])


def test_it_refuses_an_unbounded_route_followed_by_another(served):
    bad = config(
        [{"lo": 0, "hi": None, "kernel": kernel()}, {"lo": 500, "hi": 600, "kernel": "default"}], version=2
    )
    assert_refused_and_kept(served, bad, ["routes overlap"])


def test_it_refuses_unsorted_routes(served):
    bad = config(
        [{"lo": 100, "hi": 200, "kernel": kernel()}, {"lo": 0, "hi": 50, "kernel": "default"}], version=2
    )
    assert_refused_and_kept(served, bad, ["routes not sorted", "route 1"])


def test_it_refuses_a_gap_that_no_default_covers(served):
    bad = config(
        [{"lo": 0, "hi": 100, "kernel": kernel()}, {"lo": 200, "hi": None, "kernel": "default"}], version=2
    )
    del bad["fallback"]
    assert_refused_and_kept(served, bad, ["gap not covered", "[100, 200)"])


def test_without_a_fallback_routes_must_reach_infinity(served):
    bad = config([{"lo": 0, "hi": 100, "kernel": kernel()}], version=2)
    del bad["fallback"]
    assert_refused_and_kept(served, bad, ["gap not covered", "[100, inf)"])


def test_it_refuses_a_source_whose_hash_does_not_match(served):
    k = kernel(cid="c9")
    k["source"] = RECORDING + "\n# edited after review\n"
    assert_refused_and_kept(
        served, config([{"lo": 0, "hi": None, "kernel": k}], version=2), ["hash mismatch", "c9"]
    )


def test_it_refuses_a_missing_source_file(served, tmp_path):
    k = kernel(cid="c7")
    del k["source"]
    k["source_path"] = "c7.py"
    bad = config([{"lo": 0, "hi": None, "kernel": k}], version=2)
    assert_refused_and_kept(served, bad, ["missing source", "c7.py"], base_dir=tmp_path)


def test_it_refuses_a_kernel_with_no_source_at_all(served):
    k = kernel()
    del k["source"]
    assert_refused_and_kept(
        served, config([{"lo": 0, "hi": None, "kernel": k}], version=2), ["missing source"]
    )


@pytest.mark.parametrize(
    "mutate, words",
    [
        (lambda c: c.update(schema="ark.serving/0"), ["bad schema", "ark.serving/1"]),
        (lambda c: c.update(axis="batch"), ["bad schema", "axis"]),
        (lambda c: c.update(version="2"), ["bad schema", "version"]),
        (lambda c: c.update(fallback="c1"), ["bad schema", "fallback"]),
        (lambda c: c.update(extra=1), ["bad schema", "unknown keys"]),
        (lambda c: c["routes"][0].update(lo=-1), ["bad schema", "'lo'"]),
        (lambda c: c["routes"][0].update(hi=0), ["bad schema", "'hi'"]),
        (lambda c: c["routes"][0]["kernel"].update(source_hash="md5:abc"), ["bad schema", "source_hash"]),
        (lambda c: c.update(target="rmsnorm"), ["target mismatch"]),
    ],
)
def test_it_refuses_a_bad_schema_naming_the_field(served, mutate, words):
    bad = config([{"lo": 0, "hi": None, "kernel": kernel()}], version=2)
    mutate(bad)
    assert_refused_and_kept(served, bad, words)


def test_it_refuses_text_that_is_not_json(served):
    assert_refused_and_kept(served, "{not json", ["bad schema", "not JSON"])


def test_it_refuses_a_candidate_that_does_not_load(served):
    broken = "def forward(:\n"
    assert_refused_and_kept(
        served,
        config([{"lo": 0, "hi": None, "kernel": kernel("c3", broken)}], version=2),
        ["route 0", "c3", "SyntaxError"],
    )


def test_a_good_config_swaps_in(served):
    served.load(
        json.dumps(
            config(
                [{"lo": 0, "hi": 10, "kernel": "default"}, {"lo": 10, "hi": None, "kernel": kernel("c2")}],
                version=2,
            )
        )
    )
    assert served.version == 2
    assert served.kernel_for(9).name == "default"
    assert served.kernel_for(10).name == "c2"


def test_a_source_path_is_read_relative_to_the_config_and_checked(served, tmp_path):
    (tmp_path / "c5.py").write_text(RECORDING)
    k = kernel("c5")
    del k["source"]
    k["source_path"] = "c5.py"
    served.load(config([{"lo": 0, "hi": None, "kernel": k}], version=3), base_dir=tmp_path)
    assert served.kernel_for(123456).name == "c5"


def test_selection_is_half_open_at_the_range_edges():
    d = Dispatcher("dsa_topk")
    d.load(
        config(
            [
                {"lo": 0, "hi": 100, "kernel": kernel("a")},
                {"lo": 100, "hi": 200, "kernel": kernel("b")},
                {"lo": 300, "hi": None, "kernel": kernel("c")},
            ]
        )
    )
    expect = {0: "a", 99: "a", 100: "b", 199: "b", 200: "default", 299: "default", 300: "c", 10**9: "c"}
    assert {v: d.kernel_for(v).name for v in expect} == expect


def test_a_route_to_a_candidate_actually_calls_it():
    d = Dispatcher("dsa_topk")
    k = kernel("c1")
    k["params"] = {"tag": "routed"}
    d.load(config([{"lo": 0, "hi": 64, "kernel": "default"}, {"lo": 64, "hi": None, "kernel": k}]))
    calls = d.kernel_for(64).forward.__globals__["CALLS"]
    logits, lengths = torch.randn(3, 37), torch.tensor([37, 20, 1], dtype=torch.int32)
    d(logits, lengths, 8)
    assert calls == []  # 37 < 64: the default served it
    logits = torch.randn(3, 64)
    out = d(logits, torch.tensor([64, 50, 2], dtype=torch.int32), 8)
    assert calls == [(64, "routed")]
    assert torch.equal(out, default_topk(logits, torch.tensor([64, 50, 2], dtype=torch.int32), 8))
    assert d.calls == {"default": 1, "c1": 1}


def test_two_routes_over_one_source_keep_their_own_params():
    d = Dispatcher("dsa_topk")
    a, b = kernel("a"), kernel("b")
    a["params"], b["params"] = {"tag": "A"}, {"tag": "B"}
    d.load(config([{"lo": 0, "hi": 10, "kernel": a}, {"lo": 10, "hi": None, "kernel": b}]))
    assert d.kernel_for(5).forward.__globals__["PARAMS"]["tag"] == "A"
    assert d.kernel_for(50).forward.__globals__["PARAMS"]["tag"] == "B"


@pytest.mark.parametrize("n", [1, 37, 199, 760])
def test_the_default_kernel_masks_past_the_length_and_pads_with_minus_one(n):
    g = torch.Generator().manual_seed(n)
    logits = torch.randn(4, n, generator=g)
    logits[:, n // 2 :] += 100.0  # the largest values lie past the short rows' lengths
    lengths = torch.tensor([n, max(1, n // 2), 1, 0], dtype=torch.int32)
    k = 16
    out = default_topk(logits, lengths, k)
    assert out.shape == (4, k) and out.dtype == torch.int32
    for row in range(4):
        valid = int(lengths[row])
        take = min(k, valid)
        expect = set(torch.topk(logits[row, :valid], take).indices.tolist()) if take else set()
        assert set(out[row, :take].tolist()) == expect
        assert (out[row, take:] == -1).all()


def test_a_dispatcher_bound_to_hardware_refuses_a_config_for_other_hardware():
    d = Dispatcher("dsa_topk", hardware="b200")
    with pytest.raises(ServingConfigError, match="hardware mismatch"):
        d.load(config([{"lo": 0, "hi": None, "kernel": kernel()}]))
    assert d.version == 0 and d.kernel_for(5).name == "default"


def test_a_config_file_is_loaded_with_its_sources_beside_it(tmp_path):
    (tmp_path / "c6.py").write_text(RECORDING)
    k = kernel("c6")
    del k["source"]
    k["source_path"] = "c6.py"
    (tmp_path / "serving.json").write_text(
        json.dumps(config([{"lo": 1000, "hi": None, "kernel": k}], version=4))
    )
    d = Dispatcher("dsa_topk", hardware="h200")
    d.load_file(tmp_path / "serving.json")
    assert (d.version, d.kernel_for(999).name, d.kernel_for(1000).name) == (4, "default", "c6")
