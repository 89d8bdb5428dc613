"""Shared exactness check for top-k outputs (set semantics, ties allowed)."""
import torch


def _rows(out, shape, lengths, k):
    """Per row (index, length, k_eff, selected indices), after the structure checks every top-k shares:
    -1 padding past k_eff, indices in range, no duplicates."""
    M, N = shape
    assert out.shape == (M, k), out.shape
    lengths = lengths.cpu().long()
    for i in range(M):
        L = int(min(max(int(lengths[i]), 0), N))
        ke = min(k, L)
        sel = out[i, :ke]
        assert bool((out[i, ke:] == -1).all()), f"row {i}: padding not -1"
        assert bool(((sel >= 0) & (sel < L)).all()), f"row {i}: index out of range"
        assert sel.unique().numel() == ke, f"row {i}: duplicate indices"
        yield i, L, ke, sel


def check_topk(out, x, lengths, k):
    """Raise AssertionError unless out is an exact top-k set per row. x: [M, N] float."""
    out, x = out.cpu().long(), x.cpu().double()
    for i, L, ke, sel in _rows(out, x.shape, lengths, k):
        if ke == 0:
            continue
        row = x[i, :L]
        kth = torch.topk(row, ke).values[-1]
        v = row[sel]
        assert float(v.min()) == float(kth), f"row {i}: kth {float(v.min())} vs {float(kth)}"
        assert int((v > kth).sum()) == int((row > kth).sum()), f"row {i}: count above kth differs"


def indexer_scores(q, k_index, weights):
    """f64 reference I[m, s] = sum_h w[m,h] * relu(q[m,h,:] . k[s,:])."""
    s = torch.einsum("mhd,nd->mhn", q.double().cpu(), k_index.double().cpu()).clamp_min(0)
    return (s * weights.double().cpu()[:, :, None]).sum(1)


def check_topk_tol(out, ref, lengths, k, rtol=1e-3):
    """Set check against a higher-precision reference with a tolerance band around the k-th value."""
    out, ref = out.cpu().long(), ref.cpu().double()
    for i, L, ke, sel in _rows(out, ref.shape, lengths, k):
        if ke == 0 or ke == L:
            continue
        row = ref[i, :L]
        kth = float(torch.topk(row, ke).values[-1])
        tol = rtol * float(row.abs().max()) + 1e-12
        v = row[sel]
        assert float(v.min()) >= kth - tol, f"row {i}: selected {float(v.min())} below kth {kth}"
        mask = torch.ones(L, dtype=torch.bool); mask[sel] = False
        if bool(mask.any()):
            assert float(row[mask].max()) <= kth + tol, f"row {i}: left out {float(row[mask].max())} above kth {kth}"
