"""bench/peers_h200.py's glue around DeepGEMM's paged logits: positions in a row's logical sequence become the
FP8 indexer contract's global token ids through the block table, -1 past a short row. DeepGEMM itself needs a
Hopper GPU; here exact logits (the target's own f64 ones, in f32) stand in for its output, and the answer must
pass the target's check. A mapping that ignores the block table, or pads a short row wrongly, fails it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from gpu_worker.targets import dsa_indexer_topk_fp8 as t
from gpu_worker.targets._topk_common import torch_masked_topk

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("peers_h200", ROOT / "bench" / "peers_h200.py")
peers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(peers)


def _exact_logits(inputs, width: int) -> torch.Tensor:
    """What DeepGEMM returns, in exact arithmetic: [B, width] f32, garbage (here +1e30) past each length, as
    the kernel leaves those slots unwritten."""
    B = inputs[0].shape[0]
    out = torch.full((B, width), 1e30, dtype=torch.float32)
    for m in range(B):
        lg, _, _ = t.row_logits(inputs, m)
        out[m, :lg.shape[0]] = lg.float()
    return out


@pytest.mark.parametrize("shape", [t._shape(3, 2100, "normal"), t._shape(4, 5000, "ties"),
                                   t._shape(2, 3000, "relu", "full")])
def test_masked_topk_through_the_block_table_passes_the_check(shape):
    inputs = t.make_inputs(shape, 7, "cpu")
    _, _, _, lengths, block_table = inputs
    logits = _exact_logits(inputs, block_table.shape[1] * t.PAGE)
    out = peers.paged_answer(torch_masked_topk(logits, lengths, t.K), lengths, block_table, t.PAGE)
    ok, _, message = t.check(out, inputs, t.reference(inputs))
    assert ok, message
    short = lengths < t.K
    if short.any():  # the ragged draw gave a row shorter than k: its tail is -1
        m = int(short.nonzero()[0])
        assert (out[m, int(lengths[m]):] == -1).all()


def test_positions_without_the_block_table_fail_the_check():
    inputs = t.make_inputs(t._shape(3, 2100, "normal"), 7, "cpu")
    _, _, _, lengths, block_table = inputs
    positions = torch_masked_topk(_exact_logits(inputs, block_table.shape[1] * t.PAGE), lengths, t.K)
    identity = torch.arange(block_table.shape[1], dtype=torch.int32).expand_as(block_table).contiguous()
    wrong = peers.paged_answer(positions, lengths, identity, t.PAGE)
    assert not t.check(wrong, inputs, t.reference(inputs))[0]


def test_a_row_shorter_than_k_is_padded_with_minus_one():
    lengths = torch.tensor([5, 3000], dtype=torch.int32)
    block_table = torch.tensor([[9, 0], [4, 7]], dtype=torch.int32)  # page ids; 64 tokens a page
    logits = torch.randn(2, 128)
    logits[0, 5:] = 1e30  # unwritten slots past row 0's length must never be chosen
    pos = torch_masked_topk(logits, torch.tensor([5, 128], dtype=torch.int32), 8)
    assert sorted(pos[0, :5].tolist()) == [0, 1, 2, 3, 4] and (pos[0, 5:] == -1).all()
    gid = peers.paged_answer(pos, lengths, block_table, 64)
    assert sorted(gid[0, :5].tolist()) == [9 * 64 + i for i in range(5)] and (gid[0, 5:] == -1).all()
    assert all((g // 64) in (4, 7) for g in gid[1].tolist())
