"""Load a candidate module from its source text, in a fresh module namespace.

The pipeline's sandbox is a separate concern: this is the loader serving and the e2e gate use
once a source is trusted enough to run (it passed verify, or a human promoted it).
"""

import hashlib
import itertools
import linecache
import types

_counter = itertools.count()


def source_hash(source: str) -> str:
    return "sha256:" + hashlib.sha256(source.encode("utf-8")).hexdigest()


class CandidateLoadError(Exception):
    pass


def load_candidate_module(
    source: str, *, name: str = "candidate", params: dict | None = None
) -> types.ModuleType:
    """Exec `source` as a new module; route `params` override the module's PARAMS.

    Each call makes a new module object, so two routes over one source keep separate PARAMS.
    The source is registered in linecache under a unique pseudo-filename because Triton's
    @jit reads a kernel's source through inspect.
    """
    digest = source_hash(source)[7:19]
    module_name = f"ark_candidate_{name}_{digest}_{next(_counter)}".replace("-", "_")
    filename = f"<ark-candidate {name} {digest} #{module_name.rsplit('_', 1)[1]}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    module = types.ModuleType(module_name)
    module.__file__ = filename
    try:
        code = compile(source, filename, "exec")
        exec(code, module.__dict__)  # noqa: S102 -- loading a candidate is executing its source
    except Exception as exc:  # any error in a candidate's module body refuses the candidate
        raise CandidateLoadError(f"candidate {name} failed to load: {type(exc).__name__}: {exc}") from exc
    if not callable(getattr(module, "forward", None)):
        raise CandidateLoadError(f"candidate {name} defines no forward(...)")
    base = getattr(module, "PARAMS", None)
    if base is not None and not isinstance(base, dict):
        raise CandidateLoadError(f"candidate {name}: PARAMS must be a dict")
    module.PARAMS = {**(base or {}), **(params or {})}
    return module


def triton_kernel_names(module: types.ModuleType) -> set[str]:
    """Names of the @triton.jit functions a candidate module defines (through autotune/heuristics)."""
    names = set()
    for value in vars(module).values():
        seen = 0
        while value is not None and seen < 4:
            if type(value).__module__.startswith("triton") and hasattr(value, "fn"):
                fn = value.fn
                if hasattr(fn, "__name__") and not hasattr(fn, "fn"):
                    if getattr(fn, "__module__", None) == module.__name__:
                        names.add(fn.__name__)
                    break
                value = fn
                seen += 1
            else:
                break
    return names
