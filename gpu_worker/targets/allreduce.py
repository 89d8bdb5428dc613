"""allreduce and allreduce_rmsnorm: multi-process targets (one process per GPU), issue 9.

allreduce: every rank holds x_r (bf16, `numel` elements); each rank returns sum_r x_r (bf16).
allreduce_rmsnorm: every rank holds a partial x_r (bf16 [T, D]); the residual and the weight are
the same on every rank (tensor parallelism); each rank returns (h, y) with
h = bf16(sum_r x_r) + residual (bf16) and y = rmsnorm(h) * weight (bf16).

The operating axis is the message size in bytes (1 KB to 64 MB), the axis a serving config routes
on (small messages to a one-shot kernel, the rest to NCCL; docs/figures.md).

These targets do not fit the single-process pipeline (gpu_worker/pipeline/evaluate.py): inputs
are per rank, the reference needs every rank's inputs, and a candidate needs a communicator. So
they live in their own registry, MULTI_PROCESS_TARGETS, run by gpu_worker/distributed, and are not
in gpu_worker/targets.TARGETS (whose evaluate() would fail on them).

Candidate signature: forward(x, comm) (allreduce) or forward(x, residual, weight, eps, comm).
`comm` is the harness's gpu_worker.distributed.comm.Comm: rank, world_size, and per-rank staging
buffers with their address table (symmetric memory on CUDA; see comm.py for what CPU offers).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..pipeline.protocol import derive_seed
from .base import NORM_FORBIDDEN, Shape, TargetSpec, generator

KB, MB = 1 << 10, 1 << 20
BYTES_RANGE = (1 * KB, 64 * MB)
ELEMENT_BYTES = 2  # bf16
EPS = 1e-6
# Unit roundoff of bf16 (8 significant bits, round to nearest): one rounding is within 2^-8 relative.
BF16_U = 2.0 ** -8
Y_RTOL, Y_ATOL = 2.0 ** -8, 1e-5
COLLECTIVE_FORBIDDEN = frozenset({
    "all_reduce", "all_reduce_coalesced", "reduce", "reduce_scatter", "reduce_scatter_tensor",
    "all_gather", "all_gather_into_tensor", "all_to_all", "broadcast", "sum", "nansum", "add", "add_",
    "cumsum", "stack", "einsum", "matmul", "mm", "bmm", "tensordot", "dot"})


@dataclass(frozen=True)
class DistributedTarget(TargetSpec):
    """A TargetSpec whose candidate runs in `world_size` processes at once.

    rank_inputs(shape, seed, rank, device): the inputs one rank holds (without the comm), drawn from
    the shape's secret seed: per-rank parts from derive_seed(seed, "rank", rank), shared parts from
    derive_seed(seed, "shared"), so the parent can rebuild every rank's inputs for the reference.
    reference(all_inputs): all_inputs[r] is rank r's inputs; computed in float64 on CPU.
    check(output, inputs_of_this_rank, ref) as for any target.
    """
    world_size: int = 2
    rank_inputs: Callable[[Shape, int, int, Any], tuple] | None = None
    message_bytes: Callable[[Shape], int] | None = None  # the serving axis value of a shape

    def all_inputs(self, shape: Shape, seed: int, device="cpu") -> list[tuple]:
        return [self.rank_inputs(shape, seed, r, device) for r in range(self.world_size)]

    def describe(self) -> dict:
        return dict(super().describe(), world_size=self.world_size, multi_process=True)


def _single_process_inputs(shape, seed, device):
    raise NotImplementedError("a multi-process target: inputs are per rank, use rank_inputs(shape, seed, rank, device)")


def _log_uniform_bytes(rnd: random.Random, lo: int, hi: int) -> int:
    return int(math.exp(rnd.uniform(math.log(lo), math.log(hi))))


# ------------------------------------------------------------------------------------------- allreduce

def _ar_shape(numel: int) -> Shape:
    return {"bytes": numel * ELEMENT_BYTES, "numel": numel}


def ar_verification_shapes(profile: str) -> list[Shape]:
    # 1 KB, an odd size near 37 KB (18947 elements: no vector width divides it), 1 MB; full adds
    # another odd size and the largest message of the range.
    shapes = [_ar_shape(512), _ar_shape(18947), _ar_shape(MB // 2)]
    if profile == "full":
        shapes += [_ar_shape(3 * MB + 1001), _ar_shape(BYTES_RANGE[1] // ELEMENT_BYTES)]
    return shapes


def ar_random_shape(profile: str, seed: int) -> Shape:
    rnd = random.Random(seed)
    hi = 64 * KB if profile == "smoke" else BYTES_RANGE[1]
    return _ar_shape(max(1, _log_uniform_bytes(rnd, BYTES_RANGE[0], hi) // ELEMENT_BYTES))


def ar_benchmark_shapes(profile: str) -> list[Shape]:
    if profile == "smoke":
        sizes = [KB, 64 * KB, MB, 16 * MB]
    else:  # every power of two from 1 KB to 64 MB: the latency curve
        sizes = [1 << k for k in range(10, 27)]
    return [_ar_shape(b // ELEMENT_BYTES) for b in sizes]


def ar_rank_inputs(shape: Shape, seed: int, rank: int, device) -> tuple:
    g = generator(derive_seed(seed, "rank", rank), device)
    x = torch.randn(shape["numel"], generator=g, device=device).to(torch.bfloat16)
    return (x,)


def ar_reference(all_inputs: list[tuple]) -> dict:
    xs = [inp[0].detach().to("cpu", torch.float64) for inp in all_inputs]
    total = torch.zeros_like(xs[0])
    abs_total = torch.zeros_like(xs[0])
    for x in xs:
        total += x
        abs_total += x.abs()
    return {"sum": total, "abs_sum": abs_total, "world_size": len(xs)}


def _summation_tolerance(ref: dict) -> torch.Tensor:
    """|out - sum| <= max(1, W-1) * u * sum_r |x_r|: at most W-1 bf16 roundings of partial sums
    (a ring reduces W-1 times; a one-shot kernel accumulating in f32 rounds once), each within u of
    a partial sum, and every partial sum is bounded by sum_r |x_r| (Higham, Accuracy and Stability
    of Numerical Algorithms, 2nd ed., §4.2)."""
    return max(1, ref["world_size"] - 1) * BF16_U * ref["abs_sum"]


def _plain_tensor(name, t, shape, dtype) -> str | None:
    if type(t) is not torch.Tensor:
        return f"{name} is {type(t).__name__}, not a plain torch.Tensor"
    if t.dtype != dtype or tuple(t.shape) != tuple(shape):
        return f"{name}: {t.dtype} {tuple(t.shape)}, expected {dtype} {tuple(shape)}"
    return None


def _worst(err: torch.Tensor, tol: torch.Tensor) -> tuple[float, int]:
    excess = err / tol.clamp_min(1e-300)
    excess = torch.where(err == 0, torch.zeros_like(excess), excess)
    i = int(torch.argmax(excess))
    return float(excess.view(-1)[i]), i


def ar_check(output, inputs: tuple, ref: dict) -> tuple[bool, float, str]:
    x = inputs[0]
    if isinstance(output, (tuple, list)):
        if len(output) != 1:
            return False, math.inf, f"expected one tensor, got {len(output)} outputs"
        output = output[0]
    bad = _plain_tensor("the output", output, x.shape, torch.bfloat16)
    if bad:
        return False, math.inf, bad
    out = output.detach().to("cpu", torch.float64).reshape(-1)
    if bool(torch.isnan(out).any()):
        return False, math.inf, "NaN in the output"
    err = (out - ref["sum"].reshape(-1)).abs()
    tol = _summation_tolerance(ref).reshape(-1)
    excess, i = _worst(err, tol)
    max_error = float(err.max()) if err.numel() else 0.0
    if not bool(torch.isfinite(out).all()) or excess > 1.0:
        return False, max_error, (f"out[{i}] = {float(out[i]):g}, sum over ranks {float(ref['sum'].reshape(-1)[i]):g} "
                                  f"(tolerance {float(tol[i]):.3g} = {max(1, ref['world_size'] - 1)} x 2^-8 x sum |x_r|)")
    return True, max_error, "within the bf16 summation bound"


def ar_baseline(x, comm):
    """The default kernel: NCCL (CUDA) or gloo (CPU) through torch.distributed, out of place."""
    # local: torch.distributed is set up only inside a rank process
    import torch.distributed as dist
    out = x.clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM, group=comm.group)
    return out


def ar_output_spec(shape: Shape):
    return [((shape["numel"],), torch.bfloat16)]


def ar_bytes_min(shape: Shape, world_size: int = 2) -> int:
    """Bytes each GPU must receive over the interconnect at least: 2 (W-1)/W x the message
    (reduce-scatter then all-gather; nccl-tests' bus bandwidth factor)."""
    return int(2 * (world_size - 1) * shape["bytes"] / world_size)


ALLREDUCE = DistributedTarget(
    name="allreduce", version=1,
    description="All-reduce (sum) of a bf16 message over 2 GPUs, out of place; default NCCL",
    axes={"bytes": BYTES_RANGE}, dsls=("triton",), arg_names=("x", "comm"),
    verification_shapes=ar_verification_shapes, random_shape=ar_random_shape,
    benchmark_shapes=ar_benchmark_shapes, make_inputs=_single_process_inputs, reference=ar_reference,
    check=ar_check, baseline=ar_baseline, output_spec=ar_output_spec, canonical=lambda out: [out],
    bytes_min=ar_bytes_min, flops=lambda shape: 0, forbidden_torch=COLLECTIVE_FORBIDDEN,
    seed_candidates=("seed.py",), e2e_slot=None,
    tolerance={"abs": "max(1, W-1) * 2^-8 * sum_r |x_r| per element"},
    world_size=2, rank_inputs=ar_rank_inputs, message_bytes=lambda shape: shape["bytes"],
)


# ------------------------------------------------------------------------------- allreduce_rmsnorm

def _rn_shape(tokens: int, hidden: int) -> Shape:
    return {"tokens": tokens, "hidden": hidden, "bytes": tokens * hidden * ELEMENT_BYTES}


def rn_verification_shapes(profile: str) -> list[Shape]:
    shapes = [_rn_shape(1, 512), _rn_shape(37, 256), _rn_shape(64, 8192)]  # 1 KB, 18.5 KB odd rows, 1 MB
    if profile == "full":
        shapes += [_rn_shape(199, 7168), _rn_shape(4096, 8192)]  # the largest: 64 MB
    return shapes


def rn_random_shape(profile: str, seed: int) -> Shape:
    rnd = random.Random(seed)
    hidden = 8 * rnd.randint(32 if profile == "smoke" else 256, 128 if profile == "smoke" else 1024)
    hi = 64 * KB if profile == "smoke" else BYTES_RANGE[1]
    tokens = max(1, _log_uniform_bytes(rnd, BYTES_RANGE[0], hi) // (hidden * ELEMENT_BYTES))
    return _rn_shape(tokens, hidden)


def rn_benchmark_shapes(profile: str) -> list[Shape]:
    hidden = 8192
    tokens = [1, 4, 64, 1024] if profile == "smoke" else [1 << k for k in range(13)]  # 16 KB .. 64 MB
    return [_rn_shape(t, hidden) for t in tokens]


def rn_rank_inputs(shape: Shape, seed: int, rank: int, device) -> tuple:
    T, D = shape["tokens"], shape["hidden"]
    g = generator(derive_seed(seed, "rank", rank), device)
    x = torch.randn(T, D, generator=g, device=device).to(torch.bfloat16)
    gs = generator(derive_seed(seed, "shared"), device)
    residual = (2.0 * torch.randn(T, D, generator=gs, device=device)).to(torch.bfloat16)
    weight = (0.5 + torch.rand(D, generator=gs, device=device)).to(torch.bfloat16)
    return x, residual, weight, EPS


def rn_reference(all_inputs: list[tuple]) -> dict:
    ar = ar_reference([(inp[0],) for inp in all_inputs])
    _, residual, weight, eps = all_inputs[0]
    return dict(ar, residual=residual.detach().to("cpu", torch.float64), weight=weight.detach().to("cpu", torch.float64),
                eps=eps)


def rn_check(output, inputs: tuple, ref: dict) -> tuple[bool, float, str]:
    """h within the summation bound plus one rounding of (sum + residual); y within add_rmsnorm's
    tolerance of rmsnorm(h) computed in float64 from the h the candidate returned."""
    x = inputs[0]
    if not isinstance(output, (tuple, list)) or len(output) != 2:
        return False, math.inf, f"expected a pair (h, y), got {type(output).__name__}"
    for name, t in zip(("h", "y"), output):
        bad = _plain_tensor(name, t, x.shape, torch.bfloat16)
        if bad:
            return False, math.inf, bad
    h, y = (t.detach().to("cpu", torch.float64) for t in output)
    if bool(torch.isnan(h).any()) or bool(torch.isnan(y).any()):
        return False, math.inf, "NaN in the output"
    h_ref = ref["sum"] + ref["residual"]
    h_tol = _summation_tolerance(ref) + BF16_U * (ref["abs_sum"] + ref["residual"].abs())
    h_err = (h - h_ref).abs()
    excess, i = _worst(h_err, h_tol)
    if not bool(torch.isfinite(h).all()) or excess > 1.0:
        r, c = divmod(i, x.shape[-1])
        return False, float(h_err.max()), (f"h[{r}, {c}] = {float(h[r, c]):g}, expected sum + residual = "
                                           f"{float(h_ref[r, c]):g} (tolerance {float(h_tol[r, c]):.3g})")
    y_ref = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + ref["eps"]) * ref["weight"]
    y_err = (y - y_ref).abs()
    excess, i = _worst(y_err, Y_ATOL + Y_RTOL * y_ref.abs())
    max_error = max(float(h_err.max()), float(y_err.max()))
    if not bool(torch.isfinite(y).all()) or excess > 1.0:
        r, c = divmod(i, x.shape[-1])
        return False, max_error, (f"y[{r}, {c}] = {float(y[r, c]):g}, rmsnorm of the returned h gives "
                                  f"{float(y_ref[r, c]):g} (tolerance {Y_ATOL:g} + {Y_RTOL:g} x |ref|)")
    return True, max_error, "h within the summation bound, y within tolerance of rmsnorm(h)"


def rn_baseline(x, residual, weight, eps, comm):
    """The default: NCCL all-reduce, then residual add and RMSNorm in torch (three kernels or more)."""
    # local: torch.distributed is set up only inside a rank process
    import torch.distributed as dist
    s = x.clone()
    dist.all_reduce(s, op=dist.ReduceOp.SUM, group=comm.group)
    h = s + residual
    hf = h.float()
    y = (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(torch.bfloat16)
    return h, y


ALLREDUCE_RMSNORM = DistributedTarget(
    name="allreduce_rmsnorm", version=1,
    description="All-reduce (sum) of bf16 partials over 2 GPUs fused with residual add and RMSNorm",
    axes={"bytes": BYTES_RANGE}, dsls=("triton",), arg_names=("x", "residual", "weight", "eps", "comm"),
    verification_shapes=rn_verification_shapes, random_shape=rn_random_shape,
    benchmark_shapes=rn_benchmark_shapes, make_inputs=_single_process_inputs, reference=rn_reference,
    check=rn_check, baseline=rn_baseline,
    output_spec=lambda shape: [((shape["tokens"], shape["hidden"]), torch.bfloat16)] * 2,
    canonical=lambda out: list(out),
    bytes_min=lambda shape: ar_bytes_min(shape) + 4 * shape["bytes"],  # link, plus read x, r; write h, y
    flops=lambda shape: 0, forbidden_torch=COLLECTIVE_FORBIDDEN | NORM_FORBIDDEN,
    seed_candidates=(), e2e_slot=None,  # no seed yet: the fused one-shot kernel is future work
    tolerance={"h": "summation bound + 2^-8 x (sum |x_r| + |residual|)", "y_rtol": Y_RTOL, "y_atol": Y_ATOL},
    world_size=2, rank_inputs=rn_rank_inputs, message_bytes=lambda shape: shape["bytes"],
)

MULTI_PROCESS_TARGETS: dict[str, DistributedTarget] = {t.name: t for t in (ALLREDUCE, ALLREDUCE_RMSNORM)}


def get_multi_process_target(name: str) -> DistributedTarget:
    try:
        return MULTI_PROCESS_TARGETS[name]
    except KeyError:
        raise KeyError(f"unknown multi-process target {name!r}; known: {', '.join(sorted(MULTI_PROCESS_TARGETS))}") from None
