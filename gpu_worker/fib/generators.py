"""Input generators an imported document may declare (docs/interop.md, "Inputs a Definition cannot describe").

A FlashInfer-Bench Definition gives each input a shape and a dtype, nothing more: it cannot say that an
int32 tensor holds lengths bounded by the cache, that another is a page table over that cache, or that an
int8 cache holds FP8 bytes followed by f32 scales. FlashInfer-Bench itself draws them at random (random
integers in [-1024, 1024) and random bytes), which are not valid inputs of a paged kernel. So the document
may name, per input, one of the generators below; the rest are drawn by FlashInfer-Bench's `gen_inputs`.

    "inputs": {
      "seq_lens": {"kind": "lengths", "max": "max_num_pages * page_size"},       # "min" defaults to "1"
      "block_table": {"kind": "page_table", "lengths": "seq_lens", "cache": "k_index_cache_fp8"},
      "k_index_cache_fp8": {"kind": "fp8_paged_cache"}}

Standard library only: the web side checks declarations before any child process starts; the drawing is in
gpu_worker/fib/draw.py.
"""

from __future__ import annotations

import math

KINDS = {
    "lengths": "one length per row in [min, max] (expressions over the axes): the first row at max, the "
               "second at min, then uniform (even rows) and log-uniform (odd rows) between",
    "page_table": "per row, ceil(length / page size) distinct page ids below the cache's page count, then "
                  "0; rows take their pages from one shuffle of the cache's pages",
    "fp8_paged_cache": "DeepGEMM's paged FP8 layout [pages, page_size, 1, D + 4] as bytes: per page the "
                       "page_size tokens' D FP8 e4m3 values, then their f32 scales (amax / 448 per token)",
}
_PARAMS = {"lengths": ({"max"}, {"min"}), "page_table": ({"lengths", "cache"}, set()), "fp8_paged_cache": (set(), set())}
_INT = {"int8", "int16", "int32", "int64", "uint8"}


class GeneratorError(ValueError):
    """A generator declaration was refused; the message names every problem."""


def evaluate(expr: str, env: dict[str, int]):
    """An expression of the document (a constraint, a generator's bound) over the axis values only: no
    builtins, no names but the axes."""
    return eval(compile(str(expr), "<expression>", "eval"), {"__builtins__": {}}, dict(env))  # noqa: S307 - axes only


def _shape_names(definition: dict, name: str) -> list:
    return list(((definition.get("inputs") or {}).get(name) or {}).get("shape") or [])


def _dtype(definition: dict, name: str) -> str:
    return str(((definition.get("inputs") or {}).get(name) or {}).get("dtype") or "")


def check_generators(definition: dict, inputs: dict) -> dict:
    """Refuse declarations that name no input, an unknown kind, missing or unknown parameters, or an input
    whose dtype or rank the generator cannot fill; returns them unchanged."""
    problems = []
    if not isinstance(inputs, dict):
        raise GeneratorError("'inputs' must map input names to generator declarations")
    names = list(definition.get("inputs") or {})
    axes = set((definition.get("axes") or {}))
    for name, decl in inputs.items():
        if name not in names:
            problems.append(f"input generator for {name!r}: the definition has no such input (inputs: {', '.join(names)})")
            continue
        kind = (decl or {}).get("kind") if isinstance(decl, dict) else None
        if kind not in KINDS:
            problems.append(f"input {name}: unknown generator kind {kind!r} (known: {', '.join(KINDS)})")
            continue
        required, optional = _PARAMS[kind]
        given = set(decl) - {"kind"}
        if required - given:
            problems.append(f"input {name}: {kind} needs {', '.join(sorted(required - given))}")
        if given - required - optional:
            problems.append(f"input {name}: {kind} takes no {', '.join(sorted(given - required - optional))}")
        rank, dtype = len(_shape_names(definition, name)), _dtype(definition, name)
        if kind == "lengths":
            if rank != 1 or dtype not in _INT:
                problems.append(f"input {name}: lengths fill a 1-D integer tensor, not {dtype} of rank {rank}")
            for key in ("max", "min"):
                if key in decl:
                    try:
                        code = compile(str(decl[key]), "<expression>", "eval")
                    except SyntaxError as exc:
                        problems.append(f"input {name}: {key} {decl[key]!r} is not an expression: {exc.msg}")
                        continue
                    unknown = sorted(set(code.co_names) - axes)
                    if unknown:
                        problems.append(f"input {name}: {key} names {', '.join(unknown)}, which are no axes")
        elif kind == "page_table":
            if rank != 2 or dtype not in _INT:
                problems.append(f"input {name}: a page table fills a 2-D integer tensor, not {dtype} of rank {rank}")
            lengths, cache = decl.get("lengths"), decl.get("cache")
            if (inputs.get(lengths) or {}).get("kind") != "lengths":
                problems.append(f"input {name}: lengths {lengths!r} must name an input with a lengths generator")
            elif _shape_names(definition, lengths)[:1] != _shape_names(definition, name)[:1]:
                problems.append(f"input {name}: its rows and {lengths}'s must be the same axis")
            if cache not in names or len(_shape_names(definition, cache)) < 2:
                problems.append(f"input {name}: cache {cache!r} must name an input shaped [pages, page_size, ...]")
        elif kind == "fp8_paged_cache" and (rank != 4 or dtype not in ("int8", "uint8")):
            problems.append(f"input {name}: the FP8 paged cache is a 4-D int8 or uint8 tensor, not {dtype} of rank {rank}")
    if problems:
        raise GeneratorError("; ".join(problems))
    return inputs


def input_dims(definition: dict, name: str, env: dict[str, int]) -> list[int]:
    return [int(env[d]) if isinstance(d, str) else int(d) for d in _shape_names(definition, name)]


def length_bounds(decl: dict, env: dict[str, int]) -> tuple[int, int]:
    return int(evaluate(decl.get("min", "1"), env)), int(evaluate(decl["max"], env))


def generator_problems(definition: dict, inputs: dict, env: dict[str, int]) -> list[str]:
    """What keeps the declared generators from drawing valid inputs at these axis values (const and var):
    lengths out of order, a row needing more pages than its table has columns or than the cache holds, a
    cache whose tokens have no room for the scale."""
    problems = []
    for name, decl in (inputs or {}).items():
        try:
            if decl["kind"] == "lengths":
                lo, hi = length_bounds(decl, env)
                if not 0 <= lo <= hi:
                    problems.append(f"{name}: lengths need 0 <= min <= max, got [{lo}, {hi}]")
            elif decl["kind"] == "page_table":
                _, hi = length_bounds(inputs[decl["lengths"]], env)
                pages, page_size = input_dims(definition, decl["cache"], env)[:2]
                width = input_dims(definition, name, env)[1]
                need = math.ceil(hi / page_size) if page_size > 0 else math.inf
                if need > width or need > pages:
                    problems.append(f"{name}: a row of {hi} tokens needs {need} pages; the table has {width} "
                                    f"columns and the cache {pages} pages")
            elif decl["kind"] == "fp8_paged_cache":
                dims = input_dims(definition, name, env)
                if dims[2] != 1 or dims[3] <= 4:
                    problems.append(f"{name}: the FP8 paged cache needs one head and room for a 4-byte scale, "
                                    f"got {dims}")
        except (KeyError, NameError, TypeError, ValueError, ArithmeticError) as exc:
            problems.append(f"{name}: cannot evaluate its generator at {env}: {exc}")
    return problems
