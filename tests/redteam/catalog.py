"""The red-team candidates as the harness receives them, for tests/redteam/test_redteam.py and
bench/redteam_gpu.py (the GPU host, which has no pytest).

Each file in candidates/ opens with a docstring that says `target: <name>` (or the name implies it),
`expect: <code>[|<code>...]` (or `pass`), and `gpu-only` for a hack only a GPU run can expose. A candidate
that is a shared kernel with one shortcut switched on says `kernel: <module>` (a file in kernels/) and
`shortcut: {<keyword>: <value>, ...}`: its source is its docstring, then that kernel with the kernels it
imports written in place of the import (a candidate is one file), then the SHORTCUT the kernel's
forward passes on. A candidate whose hack is its own Python may import a shared kernel instead
(`from ..kernels.<module> import ...`): that line is replaced by the module, bundled the same way.
Standard library only."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
CANDIDATES = HERE / "candidates"
KERNELS = HERE / "kernels"
_LOCAL_IMPORT = re.compile(r"^from \.(\w+) import [\w, ]+$", re.MULTILINE)  # in kernels/
_KERNEL_IMPORT = re.compile(r"^from \.\.kernels\.(\w+) import [\w, ]+$", re.MULTILINE)  # in candidates/


@dataclass(frozen=True)
class Candidate:
    name: str
    target: str
    expect: tuple[str, ...]
    gpu_only: bool
    source: str


def _field(doc: str, name: str) -> str | None:
    m = re.search(rf"^{name}: (.+)$", doc, re.MULTILINE)
    return m.group(1).strip() if m else None


def _target_from_name(name: str) -> str:
    return "dsa_indexer_topk" if "indexer" in name else "add_rmsnorm" if "rmsnorm" in name else "dsa_topk"


def _bundle(module: str, seen: set[str]) -> str:
    """kernels/<module>.py without its docstring, each `from .other import ...` replaced by other's bundle."""
    if module in seen:
        return ""
    seen.add(module)
    text = (KERNELS / f"{module}.py").read_text()
    body = text.split('"""', 2)[2] if text.startswith('"""') else text
    return _LOCAL_IMPORT.sub(lambda m: _bundle(m.group(1), seen), body)


def _once(source: str) -> str:
    """Each import line once (a second `import torch` rebinds a module name, which the guard refuses)."""
    seen, lines = set(), []
    for line in source.splitlines():
        if line.startswith(("import ", "from ")):
            if line in seen:
                continue
            seen.add(line)
        lines.append(line)
    return "\n".join(lines) + "\n"


def load(path: Path) -> Candidate:
    text = path.read_text()
    doc = text.split('"""')[1]
    expect = re.search(r"expect: (\S+)", doc).group(1).split("|")
    kernel = _field(doc, "kernel")
    source = text
    if _KERNEL_IMPORT.search(text):
        source = _once(_KERNEL_IMPORT.sub(lambda m: _bundle(m.group(1), set()), text))
    if kernel:
        shortcut = ast.literal_eval(_field(doc, "shortcut") or "{}")
        source = _once(f'"""{doc}"""\n{_bundle(kernel, set())}\nSHORTCUT = {shortcut!r}\n')
    return Candidate(name=path.stem, target=_field(doc, "target") or _target_from_name(path.stem),
                     expect=tuple(expect), gpu_only="gpu-only" in doc, source=source)


def source(name: str) -> str:
    """The source the harness receives for candidates/<name>.py."""
    return load(CANDIDATES / f"{name}.py").source


def all_candidates() -> list[Candidate]:
    return [load(p) for p in sorted(CANDIDATES.glob("*.py"))]
