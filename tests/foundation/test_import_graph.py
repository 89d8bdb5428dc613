"""The import graph of console, loop and gpu_worker, read from the source with `ast`: module-level and
function-local imports alike. No cycle, every function-local import says why it is local, and the web side
reaches neither torch nor triton (docs/contract.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("console", "loop", "gpu_worker")
# kernel sources and their history are data the pipeline loads by path, not part of the program
SKIP = ("gpu_worker/candidates/",)


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith(SKIP) or "/migrations/" in rel:
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _resolve(name: str, modules) -> str | None:
    """The longest known module that `name` names or lies inside."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(module: str, path: Path):
    """(imported name, line, is function-local) for every import in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    local_lines = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    local_lines.add(id(inner))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, id(node) in local_lines
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            for alias in node.names:  # `from pkg import submodule` imports the submodule
                yield f"{stem}.{alias.name}", node.lineno, id(node) in local_lines


def graph(modules=MODULES) -> dict[str, set[str]]:
    edges = {}
    for module, path in modules.items():
        edges[module] = set()
        for name, _, _ in _imports(module, path):
            target = _resolve(name, modules)
            if target and target != module and not module.startswith(target + "."):
                edges[module].add(target)
    return edges


def external(modules=MODULES) -> dict[str, set[str]]:
    """Per module, the top-level names of what it imports from outside the three packages."""
    out = {}
    for module, path in modules.items():
        out[module] = {name.split(".")[0] for name, _, _ in _imports(module, path)
                       if _resolve(name, modules) is None}
    return out


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle_through_a_local_import(tmp_path):
    (tmp_path / "a.py").write_text("import b\n")
    (tmp_path / "b.py").write_text("def f():\n    import a  # late: a imports b\n")
    (tmp_path / "c.py").write_text("import a\n")
    modules = {name: tmp_path / f"{name}.py" for name in ("a", "b", "c")}
    assert cycles(graph(modules)) == [["a", "b"]]


def test_no_import_cycle():
    found = cycles(graph())
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_every_function_local_import_says_why():
    silent = []
    for module, path in MODULES.items():
        lines = path.read_text(encoding="utf-8").splitlines()
        for _, lineno, local in _imports(module, path):
            if not local:
                continue
            here, above = lines[lineno - 1], lineno - 2
            # one comment may head a block of local imports: look above the block's first line
            while above >= 0 and (not lines[above].strip() or lines[above].strip().startswith(("import ", "from "))):
                above -= 1
            if "#" not in here and not (above >= 0 and lines[above].strip().startswith("#")):
                silent.append(f"{path.relative_to(ROOT)}:{lineno}: {here.strip()}")
    silent = sorted(set(silent))
    assert not silent, "function-local imports without a comment saying why:\n" + "\n".join(silent)


@pytest.mark.parametrize("heavy", ["torch", "triton"])
def test_the_web_side_cannot_reach_torch_through_any_import(heavy):
    """From console and loop, following every import (local ones too), no module imports torch or triton."""
    edges, ext = graph(), external()
    seen, todo = set(), [m for m in MODULES if m.split(".")[0] in ("console", "loop")]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(edges[module])
    offenders = sorted(m for m in seen if heavy in ext[m])
    assert not offenders, f"the web side reaches {heavy} through: {offenders}"
