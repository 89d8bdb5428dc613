"""The GPU worker's guard, run on the web side before a person's source is queued (the submit page's
"check"): the same static checks the worker's first stage makes, so a source the guard would fail is
shown with its findings instead of spending a GPU slot.

`gpu_worker/pipeline/guard.py` itself imports only the standard library, but importing it as
`gpu_worker.pipeline.guard` runs the package's `__init__`, which imports the targets and so torch; the
web side has no torch (docs/architecture.md). So guard.py is loaded by path, once, as a module of a stand-in
package whose folder is gpu_worker/pipeline and whose `__init__` never runs: its one relative import (the
lists in guard_rules.py, standard library only) resolves there. The
target's guard inputs (argument names, DSLs, forbidden torch calls) come from the torch-free catalog.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from functools import cache
from pathlib import Path

import gpu_worker
from gpu_worker.fib.document import target_info
from gpu_worker.target_catalog import CATALOG
from loop.models import Target
from loop.services.candidates import source_problems

GUARD_PATH = Path(gpu_worker.__file__).resolve().parent / "pipeline" / "guard.py"


@cache
def _guard():
    package = types.ModuleType("ark_web_guard")
    package.__path__ = [str(GUARD_PATH.parent)]
    sys.modules["ark_web_guard"] = package
    spec = importlib.util.spec_from_file_location("ark_web_guard.guard", GUARD_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def source_check(source: str, target: Target) -> dict:
    """{"problems": what submission would refuse, "findings": the guard's findings (code, message, line),
    "ok": neither, "kernels": the kernels the guard found}."""
    problems = source_problems(source, dsls=target.dsls)
    info = CATALOG.get(target.name) or (target_info(target.document) if target.document else None)
    findings, kernels = [], []
    if info is not None and isinstance(source, str) and source.strip():
        findings, guard_info = _guard().check_candidate(source, info)
        kernels = guard_info.get("kernels", [])
    elif info is None:
        problems.append(f"the target {target.name} is not in this installation's catalog; the guard cannot run")
    return {"problems": problems, "findings": findings, "ok": not problems and not findings, "kernels": kernels}
