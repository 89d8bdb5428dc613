"""Output parity between a candidate's decode step and the default's.

Selections are compared as sets (docs/figures.md, Checking a top-k): with kth the row's k-th largest valid logit,
every selected index is unique and inside the row's valid length, every selected value is >= kth,
the number selected strictly above kth equals the number in the row, and the rest is -1. That
is "agrees with the default except among ties at the boundary" without trusting torch.topk's
tie order.
"""

import torch


def selection_valid(logits: torch.Tensor, lengths: torch.Tensor, idx: torch.Tensor, k: int) -> torch.Tensor:
    """Per row: is `idx` an exact top-k set of logits[row, :lengths[row]]? Returns bool [M]."""
    m, n = logits.shape
    if idx.shape != (m, k) or idx.dtype != torch.int32:
        return torch.zeros(m, dtype=torch.bool, device=logits.device)
    lengths = lengths.to(torch.int64).clamp(0, n)
    kk = torch.minimum(lengths, torch.full_like(lengths, k))
    pos = torch.arange(n, device=logits.device)
    masked = logits.masked_fill(pos[None, :] >= lengths[:, None], float("-inf"))
    top = torch.topk(masked, min(k, n), dim=1).values
    kth = top.gather(1, (kk - 1).clamp_min(0)[:, None]).squeeze(1)
    slot = torch.arange(k, device=logits.device)[None, :]
    live = slot < kk[:, None]
    idx64 = idx.to(torch.int64)
    in_range = (idx64 >= 0) & (idx64 < lengths[:, None])
    ok = torch.where(live, in_range, idx64 == -1).all(1)
    vals = masked.gather(1, idx64.clamp(0, n - 1))
    ok &= torch.where(live, vals >= kth[:, None], True).all(1)
    above_sel = (live & (vals > kth[:, None])).sum(1)
    above_row = (masked > kth[:, None]).sum(1)
    ok &= (above_sel == above_row) | (kk == 0)
    sorted_idx = torch.where(live, idx64, n + slot).sort(1).values
    ok &= (sorted_idx[:, 1:] != sorted_idx[:, :-1]).all(1) if k > 1 else torch.ones_like(ok)
    return ok


def overlap(a: torch.Tensor, b: torch.Tensor, n: int) -> float:
    """Mean over rows of |a ∩ b| / |a| for index sets padded with -1 (informational)."""
    m = a.shape[0]
    ma = torch.zeros((m, n + 1), dtype=torch.bool, device=a.device)
    mb = torch.zeros_like(ma)
    ma.scatter_(1, torch.where(a < 0, n, a).long(), True)
    mb.scatter_(1, torch.where(b < 0, n, b).long(), True)
    ma[:, n] = False
    mb[:, n] = False
    inter = (ma & mb).sum(1).float()
    size = ma.sum(1).float().clamp_min(1)
    return float((inter / size).mean())


def hidden_error(default, candidate) -> tuple[bool, float]:
    """Whether the candidate's final hidden state is finite, and its largest deviation from the default's
    relative to the default's largest value (inf where it is not finite)."""
    hd, hc = default["hidden"].float(), candidate["hidden"].float()
    finite = bool(torch.isfinite(hc).all())
    scale = float(hd.abs().max().clamp_min(1e-6))
    return finite, (float((hc - hd).abs().max()) / scale if finite else float("inf"))


def compare_steps(default, candidate, lengths: torch.Tensor, k: int, hidden_rtol: float) -> dict:
    """default/candidate: dicts of hidden [B, d], indices [layers, B, k], logits [layers, B, L] (copies)."""
    layers = default["indices"].shape[0]
    n = default["logits"].shape[-1]
    valid = all(
        bool(selection_valid(candidate["logits"][i], lengths, candidate["indices"][i], k).all())
        for i in range(layers)
    )
    # the first layer sees identical inputs in both runs, so its logits must match bit for bit
    same_first_logits = bool(torch.equal(default["logits"][0], candidate["logits"][0]))
    finite, err = hidden_error(default, candidate)
    sets_agree = valid and same_first_logits
    return {
        "sets_agree": sets_agree,
        "hidden_max_err": err,
        "hidden_rtol": hidden_rtol,
        "overlap_per_layer": [
            round(overlap(default["indices"][i], candidate["indices"][i], n), 6) for i in range(layers)
        ],
        "ok": sets_agree and finite and err <= hidden_rtol,
    }


def compare_indexer_steps(default, candidate, model, hidden_rtol: float) -> dict:
    """The dsa_indexer_topk_fp8 slot: each layer's ids are checked by that target's own check against the exact
    logits of the q and weights the step kept (an FP8 boundary swap within its band passes, nothing else),
    the first layer's q and weights must be bit-equal to the default's (identical inputs), and the hidden
    state within hidden_rtol. `default`/`candidate`: step snapshots with hidden, indices, slot_out, q, w."""
    from gpu_worker.targets import dsa_indexer_topk_fp8 as fp8  # local: the slot's contract, torch only

    layers = candidate["slot_out"].shape[0]
    checks = []
    for i in range(layers):
        inputs = (candidate["q"][i], model.layers[i]["idx_pages"], candidate["w"][i], model.lengths, model.block_table)
        ok, _, message = fp8.check(candidate["slot_out"][i], inputs, fp8.reference(inputs))
        checks.append((ok, message))
    valid = all(ok for ok, _ in checks)
    same_first = bool(torch.equal(default["q"][0].view(torch.uint8), candidate["q"][0].view(torch.uint8))
                      and torch.equal(default["w"][0], candidate["w"][0]))
    finite, err = hidden_error(default, candidate)
    n = model.pages_per_row * 64
    result = {
        "sets_agree": valid and same_first,
        "hidden_max_err": err,
        "hidden_rtol": hidden_rtol,
        "overlap_per_layer": [
            round(overlap(default["indices"][i], candidate["indices"][i], n), 6) for i in range(layers)
        ],
        "ok": valid and same_first and finite and err <= hidden_rtol,
    }
    if not valid:
        result["check"] = next(message for ok, message in checks if not ok)
    return result
