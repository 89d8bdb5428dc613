"""What each target is, without its code: name, version, axes, DSLs, e2e slot, value families, operating
range, tolerance. Standard library only, so the web side (target rows, prompts, range pages) reads it
without torch. This is the one place a target's metadata is written: gpu_worker/targets/ builds each
TargetSpec from its entry here (`TargetSpec.of`) and adds the code (inputs, reference, check)
(docs/contract.md, What the web side may import)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

CANDIDATES_DIR = Path(__file__).resolve().parent / "candidates"

# torch functions and tensor methods a candidate may not call, by what they would let it skip
TOPK_FORBIDDEN = frozenset({"topk", "sort", "argsort", "kthvalue", "msort", "sort_stable", "median",
                            "nanmedian", "quantile", "nanquantile", "mode"})
DENSE_FORBIDDEN = frozenset({"matmul", "mm", "bmm", "einsum", "addmm", "baddbmm", "tensordot", "linear",
                             "mv", "dot", "inner", "outer", "addbmm", "addmv", "chain_matmul", "multi_dot"})
NORM_FORBIDDEN = frozenset({"rms_norm", "layer_norm", "group_norm", "batch_norm", "instance_norm", "norm",
                            "vector_norm", "normalize", "rsqrt", "rsqrt_"})

# the top-k targets' value families (what each looks like: gpu_worker/targets/_topk_common.py)
TOPK_FAMILIES = ("normal", "relu", "ties", "heavy_tail", "near_bf16")


@dataclass(frozen=True)
class TargetInfo:
    name: str
    version: int
    description: str
    axes: dict[str, tuple[int, int]]              # operating range, inclusive
    dsls: tuple[str, ...]
    arg_names: tuple[str, ...]
    forbidden_torch: frozenset[str]
    seed_candidates: tuple[str, ...] = ()         # file names under gpu_worker/candidates/<name>/
    e2e_slot: str | None = None
    tolerance: dict[str, float] = field(default_factory=dict)  # the check's bounds, by name
    # The kinds of input values make_inputs can draw: a shape's "values" field names one. Verification
    # draws every family across its shapes and the benchmark rotates its input sets over them.
    value_families: tuple[str, ...] = ("normal",)
    # Per axis, inclusive bins that tile the operating range: every bin, and both ends of every axis,
    # are verified on every run, whatever the profile (docs/verification.md).
    axis_classes: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    # the two operating axes its speed depends on, (rows of the heatmap, columns): range analysis and
    # serving routes work on this grid (docs/keep-rule.md, Winning regions)
    grid: tuple[str, ...] = ()

    def seed_paths(self) -> list[Path]:
        return [CANDIDATES_DIR / self.name / f for f in self.seed_candidates]

    def describe(self) -> dict:
        return {
            "name": self.name, "version": self.version, "description": self.description,
            "axes": {k: list(v) for k, v in self.axes.items()}, "dsls": list(self.dsls),
            "args": list(self.arg_names), "seed_candidates": [str(p) for p in self.seed_paths()],
            "e2e_slot": self.e2e_slot, "tolerance": dict(self.tolerance),
            "forbidden_torch": sorted(self.forbidden_torch), "value_families": list(self.value_families),
            "axis_classes": {k: [list(b) for b in v] for k, v in self.axis_classes.items()},
        }


# Row bins from one decode row to a full batch, shared by the top-k targets.
TOPK_ROWS_CLASSES = ((1, 1), (2, 8), (9, 64), (65, 128))

DSA_TOPK = TargetInfo(
    name="dsa_topk", version=1,
    description="DSA decode top-k: int32 indices of the 2048 largest f32 logits over each row's length, -1 padded",
    axes={"n_ctx": (4096, 262144), "rows": (1, 128)}, dsls=("triton", "cute"),
    arg_names=("logits", "lengths", "k"), forbidden_torch=TOPK_FORBIDDEN, seed_candidates=("seed.py",),
    e2e_slot="topk", tolerance={"values": 0.0}, value_families=TOPK_FAMILIES + ("indexer",),
    # length bins up to the 256K the DSA range reaches: a kernel wrong only past 64K must meet a shape there
    axis_classes={"n_ctx": ((4096, 8192), (8193, 32768), (32769, 65536), (65537, 131072), (131073, 262144)),
                  "rows": TOPK_ROWS_CLASSES},
    grid=("rows", "n_ctx"),
)

DSA_INDEXER_TOPK = TargetInfo(
    name="dsa_indexer_topk", version=1,
    description="DSA lightning indexer: sum_h w*relu(q.k) scores then top-2048 indices per row, -1 padded",
    axes={"n_ctx": (4096, 262144), "rows": (1, 128)}, dsls=("triton", "cute"),
    arg_names=("q", "k_index", "weights", "lengths", "k"), forbidden_torch=TOPK_FORBIDDEN | DENSE_FORBIDDEN,
    seed_candidates=("seed.py",),
    # bf16 operands, f32 accumulation: scores agree to ~1e-6 of the row's largest |score|; near-ties within
    # score_rtol of it may swap at the k-th boundary, nothing further. The selected scores' sum may differ
    # from the reference top-k sum by sum_bands such bands.
    tolerance={"score_rtol": 1e-4, "sum_bands": 4.0},
    value_families=TOPK_FAMILIES,
    # 32K-128K is one length bin: the cost of Triton's interpreter on a CPU host
    axis_classes={"n_ctx": ((4096, 8192), (8193, 32768), (32769, 131072), (131073, 262144)),
                  "rows": TOPK_ROWS_CLASSES},
    grid=("rows", "n_ctx"),
)

DSA_INDEXER_TOPK_FP8 = TargetInfo(
    name="dsa_indexer_topk_fp8", version=1,
    description="DSA lightning indexer in FP8 over a paged K cache (FlashInfer-Bench "
                "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64): top-2048 global token ids per row, -1 padded",
    axes={"n_ctx": (4096, 262144), "rows": (1, 128)}, dsls=("triton", "cute"),
    arg_names=("q_index_fp8", "k_index_cache_fp8", "weights", "seq_lens", "block_table"),
    forbidden_torch=TOPK_FORBIDDEN | DENSE_FORBIDDEN, seed_candidates=("seed.py",),
    # the e2e step's second slot (gpu_worker/e2e/model.py SLOTS): its gate first ran on a GPU on 2026-12-07
    e2e_slot="indexer_topk_fp8",
    # acc_eps: how far a candidate's logit may sit from the exact one, as a fraction of the token's
    # absolute-term sum S_t = scale_t * sum_h |w_h| * sum_d |q_hd k_td|. FP8 x FP8 products are exact in f32;
    # only the order of the 128 + 64 + 2 additions differs. An f32 sum in any order is within
    # (n - 1) * 2^-24 * S_t (n = 194: 1.2e-5); Hopper's FP8 tensor cores align their products to about 13
    # mantissa bits inside each MMA (DeepSeek-V3 report, section 3.3.2), which the bound must admit too:
    # 2^-10 covers both with margin (docs/kernels.md, "The FP8 indexer").
    tolerance={"acc_eps": 2.0 ** -10}, value_families=TOPK_FAMILIES,
    axis_classes={"n_ctx": ((4096, 8192), (8193, 32768), (32769, 131072), (131073, 262144)),
                  "rows": TOPK_ROWS_CLASSES},
)

ADD_RMSNORM = TargetInfo(
    name="add_rmsnorm", version=1,
    description="Fused residual add + RMSNorm: (h, y) = (x + r, rmsnorm(x + r) * w), bf16 in and out",
    axes={"hidden": (2048, 8192), "tokens": (1, 16384)}, dsls=("triton", "cute"),
    arg_names=("x", "residual", "weight", "eps"), forbidden_torch=NORM_FORBIDDEN | DENSE_FORBIDDEN,
    seed_candidates=("seed.py", "seed_cute.py"),
    # h is exact; y: f32 math then one bf16 rounding is within 2^-9 relative, so allow one more rounding
    # (2^-8) and no more
    tolerance={"h": 0.0, "y_rtol": 2.0 ** -8, "y_atol": 1e-05},
    value_families=("normal", "large", "small", "outliers"),
    # token bins from one decode token to a long prefill chunk, hidden bins over the models' widths
    axis_classes={"tokens": ((1, 1), (2, 64), (65, 1024), (1025, 16384)),
                  "hidden": ((2048, 4096), (4097, 8192))},
    grid=("tokens", "hidden"),
)

# The e2e gate's grid: a decoding model's batch size and context length (gpu_worker/e2e).
E2E_GRID = ("batch", "context")

# the single-process targets the loop mirrors into Target rows (multi-process ones: gpu_worker/targets/allreduce.py)
CATALOG: dict[str, TargetInfo] = {t.name: t for t in (DSA_TOPK, DSA_INDEXER_TOPK, DSA_INDEXER_TOPK_FP8, ADD_RMSNORM)}
