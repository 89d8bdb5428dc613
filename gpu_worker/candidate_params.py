"""A candidate's tunables: its module-level `PARAMS` (the values it runs with) and `SPACE` (the choices a sweep
may take) literals, read and rewritten as source text. Standard library only: the sweep proposer (loop/) and
the CLI's `evaluate --set` both use it, so a candidate variant is always the same source with one literal
replaced (docs/harness.md, "A variant is its source")."""

from __future__ import annotations

import ast
import json


def _module_literal(tree: ast.Module, name: str):
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return node
    return None


def read_space(source: str) -> tuple[dict, dict]:
    """(PARAMS, SPACE) literals of a candidate source; ({}, {}) when absent."""
    tree = ast.parse(source)
    found = []
    for name in ("PARAMS", "SPACE"):
        node = _module_literal(tree, name)
        value = ast.literal_eval(node.value) if node is not None else {}
        if not isinstance(value, dict):
            raise ValueError(f"{name} must be a dict literal")  # noqa: TRY004 (callers catch ValueError)
        found.append(value)
    params, space = found
    for key, choices in space.items():
        if not isinstance(choices, list) or not choices:
            raise ValueError(f"SPACE[{key!r}] must be a non-empty list of values")
    return params, space


def _literal(params: dict) -> str:
    return "{" + ", ".join(f"{json.dumps(k)}: {v!r}" for k, v in params.items()) + "}"


def rewrite_params(source: str, params: dict) -> str:
    """The source with its module-level PARAMS literal replaced by `params` (inserted after the
    imports when the source has none)."""
    tree = ast.parse(source)
    node = _module_literal(tree, "PARAMS")
    data = source.encode("utf-8")
    line_starts = [0]
    for line in data.splitlines(keepends=True):
        line_starts.append(line_starts[-1] + len(line))
    if node is None:
        imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        at = line_starts[imports[-1].end_lineno] if imports else 0
        return (data[:at] + f"\nPARAMS = {_literal(params)}\n".encode() + data[at:]).decode("utf-8")
    value = node.value
    start = line_starts[value.lineno - 1] + value.col_offset  # col offsets are UTF-8 byte offsets
    end = line_starts[value.end_lineno - 1] + value.end_col_offset
    return (data[:start] + _literal(params).encode() + data[end:]).decode("utf-8")


def set_params(source: str, assignments: list[str]) -> tuple[str, dict]:
    """The source with `NAME=VALUE` assignments applied to its PARAMS (VALUE a Python literal; a bare word is a
    string), and the changed entries. A name that neither PARAMS nor SPACE holds is refused: a typo would
    otherwise evaluate the unchanged candidate under a new name."""
    params, space = read_space(source)
    changed = {}
    for text in assignments:
        name, sep, raw = text.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ValueError(f"--set {text!r}: expected NAME=VALUE")
        if name not in params and name not in space:
            known = ", ".join(sorted(set(params) | set(space))) or "none"
            raise ValueError(f"--set {name}: the candidate has no such parameter (PARAMS and SPACE hold: {known})")
        try:
            value = ast.literal_eval(raw.strip())
        except (ValueError, SyntaxError):
            value = raw.strip()
        changed[name] = value
    return rewrite_params(source, {**params, **changed}), changed
