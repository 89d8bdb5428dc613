"""Draw the inputs an imported document's generators declare (gpu_worker/fib/generators.py says what each
kind is; docs/interop.md why they exist). Every draw follows the secret seed through one torch.Generator."""

from __future__ import annotations

import math

import torch
from flashinfer_bench.utils import dtype_str_to_torch_dtype

from .generators import input_dims, length_bounds

FP8_MAX = 448.0  # the largest finite float8_e4m3fn


def _lengths(decl: dict, dims: list[int], env: dict, g: torch.Generator, device) -> torch.Tensor:
    lo, hi = length_bounds(decl, env)
    rows = dims[0]
    u = torch.rand(rows, generator=g, device=device, dtype=torch.float64)
    span = math.log(hi + 1) - math.log(lo + 1)
    log_uniform = torch.exp(math.log(lo + 1) + u * span) - 1
    uniform = lo + u * (hi - lo)
    # even rows uniform (long rows, as served), odd rows log-uniform (short rows, many pages or one)
    pick = torch.arange(rows, device=device) % 2 == 0
    out = torch.where(pick, uniform, log_uniform).round().clamp(lo, hi).to(torch.int64)
    if rows:
        out[0] = hi   # a row at the bound: a table full to its last column
    if rows > 1:
        out[1] = lo   # and one at the other end (with lo = 1: a row of one token, all padding after it)
    return out


def _page_table(dims: list[int], lengths: torch.Tensor, pages: int, page_size: int, g: torch.Generator,
                device) -> torch.Tensor:
    """Rows take consecutive runs of one shuffle of all pages (wrapping around when the cache is smaller than
    the rows' needs together, so rows may share pages but never repeat one within a row); 0 past a row."""
    rows, width = dims
    need = (lengths.to(torch.int64) + page_size - 1) // page_size
    if rows and int(need.max()) > min(width, pages):
        raise ValueError(f"a row needs {int(need.max())} pages; the table has {width} columns, the cache {pages}")
    perm = torch.randperm(pages, generator=g, device=device)
    start = torch.cumsum(need, 0) - need
    col = torch.arange(width, device=device)
    ids = perm[(start[:, None] + col[None, :]) % max(pages, 1)]
    return torch.where(col[None, :] < need[:, None], ids, torch.zeros_like(ids))


def _fp8_paged_cache(dims: list[int], g: torch.Generator, device) -> torch.Tensor:
    """Normal keys quantised per token (scale = amax / 448, values key / scale in e4m3), packed as DeepGEMM
    pages: all page_size x D value bytes of a page, then its page_size f32 scales."""
    pages, page_size, _, row = dims
    dim = row - 4
    keys = torch.randn(pages, page_size, dim, generator=g, device=device)
    scale = keys.abs().amax(-1, keepdim=True).clamp(min=1e-4) / FP8_MAX
    values = (keys / scale).to(torch.float8_e4m3fn)
    flat = torch.empty(pages, page_size * row, dtype=torch.uint8, device=device)
    flat[:, :page_size * dim] = values.reshape(pages, -1).view(torch.uint8)
    flat[:, page_size * dim:] = scale.reshape(pages, page_size).contiguous().view(torch.uint8)
    return flat.view(pages, page_size, 1, row)


def draw_declared(definition: dict, inputs: dict, env: dict[str, int], seed: int, device) -> dict:
    """{input name: tensor} for every declared generator, in the Definition's dtypes; lengths first, since
    a page table covers them."""
    g = torch.Generator(device=device)
    g.manual_seed((int(seed) * 1_000_003 + 17) & 0x7FFF_FFFF_FFFF_FFFF)
    dtypes = {name: dtype_str_to_torch_dtype(spec["dtype"]) for name, spec in definition["inputs"].items()}
    out: dict[str, torch.Tensor] = {}
    order = sorted(inputs, key=lambda n: {"lengths": 0, "fp8_paged_cache": 1, "page_table": 2}[inputs[n]["kind"]])
    for name in order:
        decl, dims = inputs[name], input_dims(definition, name, env)
        if decl["kind"] == "lengths":
            value = _lengths(decl, dims, env, g, device)
        elif decl["kind"] == "page_table":
            pages, page_size = input_dims(definition, decl["cache"], env)[:2]
            value = _page_table(dims, out[decl["lengths"]], pages, page_size, g, device)
        else:
            value = _fp8_paged_cache(dims, g, device)
        out[name] = value.view(dtypes[name]) if value.dtype == torch.uint8 else value.to(dtypes[name])
    return out
