"""The e2e harness config: which model preset, which (batch, context) grid, graphs on, how to time.

It belongs to the harness, never to a candidate; its sha256 goes into every e2e result so that
a run under a changed grid or mode cannot pass as a score.
"""

import hashlib
import json
from dataclasses import asdict, dataclass, replace


@dataclass(frozen=True)
class HarnessConfig:
    profile: str
    preset: str
    batches: tuple[int, ...]
    contexts: tuple[int, ...]
    graphs: bool  # the workload is one CUDA graph per step; False only for the CPU plumbing check
    rounds: int = 20  # interleaved rounds per grid point (default, default again, [incumbent], candidate)
    round_ms: float = 25.0  # graph replays per round are sized to about this much GPU time
    seed: int = 20261202
    hidden_rtol: float = 2e-2  # max |h_cand - h_default| / max |h_default|, bf16 model of a few layers
    bootstrap: int = 2000

    @property
    def grid(self) -> list[tuple[int, int]]:
        return [(b, l) for l in self.contexts for b in self.batches]

    def as_dict(self) -> dict:
        return asdict(self)

    def sha256(self) -> str:
        return hashlib.sha256(json.dumps(self.as_dict(), sort_keys=True).encode()).hexdigest()


_H200 = HarnessConfig(profile="h200", preset="mini", batches=(1, 8, 32), contexts=(8192, 32768, 131072),
                      graphs=True)
PROFILES = {
    "h200": _H200,
    # the same grid on an H100 (80 GB): the mini preset's caches at B = 32, L = 128K are about 22 GB
    # (4 layers; per token a 576-wide bf16 latent and a 128-byte FP8 index key)
    "h100": replace(_H200, profile="h100"),
    "cpu": HarnessConfig(profile="cpu", preset="tiny", batches=(1, 3), contexts=(48, 200), graphs=False),
    # the FP8 indexer slot keeps its contract's widths (64 heads x 128, top-2048) on a CPU too: rows up to 2200
    # tokens, so that the top-k selects from more than k, in 64-token pages
    "cpu_fp8": HarnessConfig(profile="cpu_fp8", preset="tiny_fp8", batches=(1, 3), contexts=(200, 2200),
                             graphs=False),
}
# the plumbing check a CPU host runs instead of a GPU profile, per slot
CPU_PROFILE = {"dsa_topk": "cpu", "dsa_indexer_topk_fp8": "cpu_fp8"}


def normalize_grid(grid) -> list[tuple[int, int]]:
    """Accept [(B, L), ...], [{"batch": B, "context": L}, ...] or {"batches": [...], "contexts": [...]}."""
    if isinstance(grid, dict):
        return sorted((int(b), int(l)) for l in grid["contexts"] for b in grid["batches"])
    out = []
    for g in grid:
        if isinstance(g, dict):
            out.append((int(g["batch"]), int(g["context"])))
        else:
            b, l = g
            out.append((int(b), int(l)))
    return sorted(out)
