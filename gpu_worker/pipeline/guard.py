"""Static checks on a candidate's source, before anything runs (docs/isolation.md).

A finding is {"code": "guard:<kind>", "message", "line"}. Any finding fails the candidate: a
candidate is one small file that launches its own kernels through the target's DSL, and nothing
else (no files, network, environment, threads, streams, introspection or patching of modules).

The guard allows rather than forbids where a list can be short (the lists are guard_rules.py): imports
come from ALLOWED_MODULES, builtins from ALLOWED_BUILTINS (resolved by scope with `symtable`, so a name is a builtin only where
Python would look it up there), `torch.<name>` from TORCH_ALLOWED. Names bound by an import and the
builtins are never bound again anywhere (assignment, `del`, `global`, walrus, loop, `except ... as`,
`import ... as`, parameters), so every later use of such a name means what the guard saw.
"""

from __future__ import annotations

import ast
import functools
import importlib
import string
import symtable
import types

from .guard_rules import (
    ALLOWED_BUILTINS,
    ALLOWED_DUNDER_DEFS,
    ALLOWED_MODULES,
    BUILTIN_CODES,
    BUILTIN_NAMES,
    FRAME_ATTRIBUTES,
    HOST_READS,
    LAZY_NAMES,
    MAX_SOURCE_BYTES,
    MODULE_ATTRIBUTE_CODES,
    MODULE_CODES,
    OS_CODES,
    PLAIN_TYPES,
    RESOLVED_ROOTS,
    STDLIB_ALLOWED,
    STREAM_ATTRIBUTES,
    STRING_ACCESS,
    STRING_EVALUATORS,
    TORCH_ALLOWED,
    TORCH_CUDA_ALLOWED,
    TORCH_SUBMODULE_CODES,
    TRITON_SUBMODULE_CODES,
)


def _finding(code: str, message: str, node: ast.AST | None = None) -> dict:
    return {"code": code, "message": message, "line": getattr(node, "lineno", None)}


def _prefix_of(name: str, prefixes) -> str | None:
    """The first of `prefixes` that is `name` or a package above it (torch.cuda for torch.cuda.graphs)."""
    return next((p for p in prefixes if name == p or name.startswith(p + ".")), None)


def _module_code(module: str) -> str | None:
    if (prefix := _prefix_of(module, TRITON_SUBMODULE_CODES)) is not None:
        return TRITON_SUBMODULE_CODES[prefix]
    if _prefix_of(module, (a for a in ALLOWED_MODULES if a != "torch")) is not None:
        return None
    if module == "torch" or module.startswith("torch."):
        if (prefix := _prefix_of(module, TORCH_SUBMODULE_CODES)) is not None:
            return TORCH_SUBMODULE_CODES[prefix]
        if module.startswith("torch._"):
            return "guard:introspection"
        return None if module in ALLOWED_MODULES or module.startswith("torch.cuda") else "guard:forbidden_import"
    if module.startswith("cuda."):
        return "guard:native_code"
    root = module.split(".")[0]
    return MODULE_CODES.get(module, MODULE_CODES.get(root, "guard:forbidden_import"))


def _defining_module_code(module: str) -> str | None:
    """The finding for an object defined in `module` (its __module__), or None when that module is allowed.
    A C accelerator (_functools) counts as the module it serves."""
    code = _module_code(module)
    if code and module.startswith("_") and module not in MODULE_CODES and _module_code(module[1:]) is None:
        return None
    return code


@functools.lru_cache(maxsize=4096)
def _reached(full: str) -> tuple[tuple[str, str, str | None], ...]:
    """Follow `full` (a dotted path from an imported module) through the real objects, importing only
    torch, triton, CuTe DSL and the allowed standard modules, never the candidate. One (prefix, kind, where)
    per step: ("module", the module's own name), ("builtin", its name) for a function of the builtins, or
    ("object", the module that defines the class, function or the object's type); plain numbers, strings,
    containers and descriptors of a class add nothing. A step this host cannot resolve
    (a package that is not installed) ends the walk; the static rules still apply to the whole path."""
    parts = full.split(".")
    if parts[0] not in RESOLVED_ROOTS:
        return ()
    try:
        value = importlib.import_module(parts[0])
    except Exception:
        return ()
    out = []
    for i, part in enumerate(parts[1:], start=1):
        prefix = ".".join(parts[:i + 1])
        try:
            nxt = getattr(value, part)
        except Exception:
            nxt = None
        if nxt is None and isinstance(value, types.ModuleType):
            try:
                nxt = importlib.import_module(f"{value.__name__}.{part}")
            except Exception:
                return tuple(out)
        if nxt is None:
            return tuple(out)
        value = nxt
        if isinstance(value, types.ModuleType):
            out.append((prefix, "module", value.__name__))
        elif isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType)):
            where = getattr(value, "__module__", None) or ""
            # a builtin re-exported (some_module.getattr) is judged by its name, as the builtin itself is
            out.append((prefix, "builtin", getattr(value, "__name__", "")) if where == "builtins" else
                       (prefix, "object", where))
        elif not isinstance(value, PLAIN_TYPES) and type(value).__module__ != "builtins":
            # (a method descriptor such as torch.Tensor.view belongs to the class already judged)
            out.append((prefix, "object", type(value).__module__ or ""))
    return tuple(out)


def _is_module(full: str) -> bool:
    """Whether a dotted path from an imported name is a module object (torch, triton.language, torch.cuda)."""
    if "." not in full:
        return True  # an alias without a dot is a top-level `import x` (or `y = x` of one)
    steps = _reached(full)
    return bool(steps) and steps[-1][0] == full and steps[-1][1] == "module"


def _module_value_ok(node) -> bool:
    """A module may be named only where the guard keeps following it: as the base of an attribute
    (torch.empty), called, probed by hasattr (a bool), or bound to a plain name (c = torch.cuda), which the
    alias table tracks."""
    parent = getattr(node, "_parent", None)
    if isinstance(parent, ast.Attribute) and parent.value is node:
        return True
    if isinstance(parent, ast.Call) and (parent.func is node or (  # or probed: hasattr(tl.extra.cuda, "x")
            isinstance(parent.func, ast.Name) and parent.func.id == "hasattr" and parent.args[:1] == [node])):
        return True
    return (isinstance(parent, ast.Assign) and parent.value is node  # (a class attribute is no name it tracks)
            and all(isinstance(t, ast.Name) for t in parent.targets)
            and not isinstance(getattr(parent, "_parent", None), ast.ClassDef))


def _own_attribute(node: ast.Attribute) -> bool:
    """`self.x = ...` inside a method of a class the candidate defines, where `self` is the method's own
    first parameter and never bound again there: the one attribute store a candidate may make."""
    if not (isinstance(node.value, ast.Name) and node.value.id == "self"):
        return False
    fn = getattr(node, "_parent", None)
    while fn is not None and not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
        fn = getattr(fn, "_parent", None)
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or not isinstance(getattr(fn, "_parent", None),
                                                                                      ast.ClassDef):
        return False
    params = fn.args.posonlyargs + fn.args.args
    if not params or params[0].arg != "self":
        return False
    return not any(isinstance(n, ast.Name) and n.id == "self" and not isinstance(n.ctx, ast.Load)
                   for n in ast.walk(fn))


def _format_fields(text: str) -> list[str]:
    """Field names of `text` read as a str.format template that reach an attribute or an item by name."""
    try:
        parsed = list(string.Formatter().parse(text))
    except (ValueError, IndexError):
        return []
    return [f for _, f, _, _ in parsed if f and ("." in f or "[" in f)]


class _Visitor(ast.NodeVisitor):
    def __init__(self, forbidden_torch: frozenset[str]):
        self.forbidden = forbidden_torch
        self.findings: list[dict] = []
        self.aliases: dict[str, str] = {}  # local name -> dotted module path or object
        self.triton_jit: set[str] = set()
        self.cute_fns: set[str] = set()
        self.launched: set[str] = set()  # names used as kernel[grid](...)
        self.loaded: set[str] = set()

    def add(self, code, message, node):
        self.findings.append(_finding(code, message, node))

    # imports -------------------------------------------------------------------------------------
    def _in_class_body(self, node):
        if isinstance(getattr(node, "_parent", None), ast.ClassDef):
            self.add("guard:introspection", "an import in a class body binds a class attribute, which the guard "
                     "does not follow: import at the top of the file", node)

    def visit_Import(self, node):
        self._in_class_body(node)
        for a in node.names:
            self._check_import(a.name, node)
            if a.asname:
                self.aliases[a.asname] = a.name
            else:
                self.aliases[a.name.split(".")[0]] = a.name.split(".")[0]

    def visit_ImportFrom(self, node):
        self._in_class_body(node)
        if node.level:
            self.add("guard:forbidden_import", "relative import", node)
            return
        mod = node.module or ""
        self._check_import(mod, node)
        for a in node.names:
            full = f"{mod}.{a.name}"
            if a.name == "*":
                self.add("guard:forbidden_import", f"'from {mod} import *'", node)
                continue
            sub = _module_code(full)
            if sub and sub != _module_code(mod):
                self.add(sub, f"import of {full}", node)
            if a.name in MODULE_ATTRIBUTE_CODES:
                self.add(MODULE_ATTRIBUTE_CODES[a.name], f"import of {full}: a module reached through {mod}", node)
            if a.name in STRING_ACCESS or a.name in FRAME_ATTRIBUTES:
                self.add("guard:introspection", f"import of {full}", node)
            self._check_dotted(full, node)
            self.aliases[a.asname or a.name] = full

    def _check_import(self, module, node):
        code = _module_code(module)
        if code:
            self.add(code, f"import of '{module}' is not allowed in a candidate", node)
            if code != "guard:forbidden_import":
                self.add("guard:forbidden_import", f"'{module}' is outside the import allowlist", node)

    # names and attributes ------------------------------------------------------------------------
    def _dotted(self, node) -> str | None:
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name) and node.id in self.aliases:
            parts.append(self.aliases[node.id])
            return ".".join(reversed(parts))
        return None

    def _check_dotted(self, full: str, node, resolve: bool = True):
        parts = full.split(".")
        if resolve:
            self._check_reached(full, node)
        if parts[0] in STDLIB_ALLOWED and len(parts) > 1 and parts[1] not in STDLIB_ALLOWED[parts[0]]:
            code = "guard:exec" if parts[1] in STRING_EVALUATORS else "guard:forbidden_import"
            self.add(code, f"{parts[0]}.{parts[1]} is not on the list of what a candidate may take from "
                     f"{parts[0]}", node)
        if parts[0] == "torch":
            if (prefix := _prefix_of(full, TORCH_SUBMODULE_CODES)) is not None:
                self.add(TORCH_SUBMODULE_CODES[prefix], f"use of {prefix}", node)
                return
            if len(parts) > 2 and parts[1] == "cuda" and parts[2] not in TORCH_CUDA_ALLOWED:
                self.add("guard:stream", f"torch.cuda.{parts[2]}: streams, events, graphs and device state "
                         "belong to the harness", node)
            elif any(p.startswith("_") for p in parts[1:]):
                self.add("guard:introspection", f"private torch API {full}", node)
            elif parts[-1] in self.forbidden:
                self.add("guard:torch_fallback", f"{full} is the torch op this target replaces", node)
            elif len(parts) == 2 and parts[1].startswith("set_"):
                self.add("guard:torch_flags", f"{full} changes global torch state", node)
            elif len(parts) > 1 and parts[1] not in TORCH_ALLOWED:
                self.add("guard:torch_fallback", f"{full}: torch.{parts[1]} is not on the list of what a "
                         "candidate may use (tensor creation, dtypes, shapes)", node)
        elif parts[0] in ("os", "posix") and len(parts) > 1:
            code = OS_CODES.get(parts[1]) or ("guard:subprocess" if parts[1].startswith(("exec", "spawn"))
                                              else "guard:file")
            self.add(code, f"{full}", node)
        elif parts[0] == "cuda" and len(parts) > 3 and parts[3] != "CUstream":
            self.add("guard:native_code", f"{full}: only CUstream may be taken from the CUDA driver bindings",
                     node)

    def _check_reached(self, full: str, node):
        """A path through an allowed module must stay in the allowed modules (what the guard checks for a
        module's own name, it checks again where the path passes through a module re-exported elsewhere)."""
        steps = _reached(full)
        for prefix, kind, where in steps:
            code = _defining_module_code(where) if where else None
            if kind == "module":
                if code:
                    self.add(code, f"{prefix} is the module {where}, reached through another module", node)
                    return
                rest = full[len(prefix):]
                if where != prefix:
                    self._check_dotted(where + rest, node, resolve=False)
            elif kind == "builtin":
                if where not in ALLOWED_BUILTINS:
                    self.add(BUILTIN_CODES.get(where, "guard:introspection"), f"{prefix} is the builtin "
                             f"{where}, which is not on the list of what a candidate may use", node)
                    return
            elif code:
                self.add(code, f"{prefix} is defined in {where}, outside the allowed modules", node)
                return

    def _check_module_value(self, full: str, node):
        if not _is_module(full) or _module_value_ok(node):
            return
        self.add("guard:introspection", f"the module {full} used as a value (in a container, an argument, a "
                 "default, a loop...): the guard follows a module only by its name, so a candidate names it there",
                 node)

    def visit_MatchClass(self, node):
        # `case object(os=m)` reads obj.os by a name that is no attribute node; positional sub-patterns read
        # the attributes a class's __match_args__ names. Only a bare type test (`case int():`) stays.
        if node.kwd_attrs or node.patterns:
            names = ", ".join(node.kwd_attrs) or "positional"
            self.add("guard:introspection", f"a class pattern reads attributes ({names[:60]}) outside the "
                     "attribute syntax", node)
        self.generic_visit(node)

    def visit_Expr(self, node):
        if not isinstance(node.value, ast.Constant):  # a bare string (a docstring) is never formatted
            self.generic_visit(node)

    def visit_Constant(self, node):
        if isinstance(node.value, str):
            for field in _format_fields(node.value):
                self.add("guard:introspection", f"the format field {{{field[:60]}}} reaches attributes or items "
                         "by a name in a string", node)

    def visit_Attribute(self, node):
        if node.attr.startswith("__") and node.attr.endswith("__"):
            self.add("guard:introspection", f"dunder attribute .{node.attr}", node)
        if node.attr in MODULE_ATTRIBUTE_CODES:
            self.add(MODULE_ATTRIBUTE_CODES[node.attr], f".{node.attr}: a module reached through another name", node)
        if node.attr in FRAME_ATTRIBUTES:
            self.add("guard:introspection", f".{node.attr}: stack frames are the harness's", node)
        if node.attr in STRING_ACCESS:
            self.add("guard:introspection", f".{node.attr}: access by a name in a string", node)
        if node.attr in LAZY_NAMES:
            self.add("guard:lazy_output", f".{node.attr}: outputs must be plain tensors", node)
        if node.attr in HOST_READS:
            self.add("guard:torch_fallback", f".{node.attr}: reads tensor values on the host; the work is the "
                     "kernel's", node)
        if node.attr in STREAM_ATTRIBUTES:
            self.add("guard:stream", f".{node.attr}: streams, events, graphs and handles belong to the harness",
                     node)
        full = self._dotted(node)
        if full is not None and not isinstance(getattr(node, "_parent", None), ast.Attribute):
            self._check_dotted(full, node)
            if isinstance(node.ctx, (ast.Store, ast.Del)):
                self.add("guard:harness", f"assignment to {full}: candidates may not patch modules", node)
            else:
                self._check_module_value(full, node)
        elif isinstance(node.ctx, (ast.Store, ast.Del)) and not _own_attribute(node):
            self.add("guard:harness", f"assignment to .{node.attr} of an object the candidate did not make: state "
                     "outside the candidate's own variables (and `self` in its own classes) is not its to change",
                     node)
        elif full is None and isinstance(node.ctx, ast.Load) and node.attr in self.forbidden:
            # called or taken as a value (f = x.topk): the same op either way
            self.add("guard:torch_fallback", f".{node.attr}: the torch op this target replaces", node)
        self.generic_visit(node)

    def visit_Name(self, node):
        if node.id in BUILTIN_CODES and node.id not in self.aliases:
            self.add(BUILTIN_CODES[node.id], f"use of {node.id}", node)
        elif node.id.startswith("__") and node.id.endswith("__"):
            self.add("guard:introspection", f"dunder name {node.id}", node)
        if node.id in LAZY_NAMES:
            self.add("guard:lazy_output", f"{node.id}", node)
        if isinstance(node.ctx, ast.Load):
            self.loaded.add(node.id)
            if node.id in self.aliases:
                self._check_dotted(self.aliases[node.id], node)
                self._check_module_value(self.aliases[node.id], node)
        elif node.id in self.aliases and "." in self.aliases[node.id]:
            pass
        self.generic_visit(node)

    def visit_Assign(self, node):
        # `c = torch.cuda` makes c.synchronize() mean torch.cuda.synchronize(): follow the alias
        value = node.value
        full = self._dotted(value) if isinstance(value, (ast.Attribute, ast.Name)) else None
        if full is not None:
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.aliases[target.id] = full
        self.generic_visit(node)

    def visit_Call(self, node):
        if isinstance(node.func, ast.Subscript) and isinstance(node.func.value, ast.Name):
            self.launched.add(node.func.value.id)
        self.generic_visit(node)

    # definitions ---------------------------------------------------------------------------------
    def _decorators(self, node) -> list[str]:
        out = []
        for d in node.decorator_list:
            target = d.func if isinstance(d, ast.Call) else d
            full = self._dotted(target) if isinstance(target, (ast.Attribute, ast.Name)) else None
            if full:
                out.append(full)
        return out

    def _dunder_def(self, name: str, node):
        if name.startswith("__") and name.endswith("__") and name not in ALLOWED_DUNDER_DEFS:
            self.add("guard:introspection", f"{name}: a method Python calls on its own when the object is "
                     "touched, outside the call the harness watches", node)

    def visit_FunctionDef(self, node):
        self._dunder_def(node.name, node)
        if node.name in LAZY_NAMES:
            self.add("guard:lazy_output", f"def {node.name}", node)
        decos = self._decorators(node)
        if any(d in ("triton.jit", "triton.runtime.jit.jit", "triton.autotune", "triton.heuristics")
               for d in decos):
            self.triton_jit.add(node.name)
        if any(d.startswith("cutlass.cute.") and d.split(".")[-1] in ("kernel", "jit") for d in decos):
            self.cute_fns.add(node.name)
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        self._dunder_def(node.name, node)
        for kw in node.keywords:
            self.add("guard:introspection", f"class {node.name}({kw.arg}=...): metaclasses and class keywords "
                     "run code of their own", node)
        for base in node.bases:
            full = self._dotted(base) if isinstance(base, (ast.Attribute, ast.Name)) else None
            if full and full.startswith("torch.") and full.split(".")[-1] == "Tensor":
                self.add("guard:lazy_output", f"class {node.name} subclasses torch.Tensor", node)
        self.generic_visit(node)


def _bindings(tree):
    """(name, node, how) for every place a name is bound or deleted, in any scope."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            yield node.id, node, "deleted" if isinstance(node.ctx, ast.Del) else "assigned"
        elif isinstance(node, ast.arg):
            yield node.arg, node, "a parameter"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name, node, "defined"
        elif isinstance(node, ast.ExceptHandler) and node.name:
            yield node.name, node, "bound by except ... as"
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:
                yield name, node, "declared global"
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                yield (a.asname or a.name.split(".")[0]), node, "imported"
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            yield node.name, node, "bound by a match pattern"
        elif isinstance(node, ast.MatchMapping) and node.rest:
            yield node.rest, node, "bound by a match pattern"


def _rebinding_findings(tree) -> list[dict]:
    """A builtin is never bound, and a name an import bound is bound nowhere else: otherwise a name
    the guard checked (open, torch, tl) can mean something else where it is used."""
    findings = []
    imported = {}
    for name, node, how in _bindings(tree):
        if how == "imported":
            imported.setdefault(name, []).append(node)
    for name, node, how in _bindings(tree):
        if name in BUILTIN_NAMES:
            findings.append(_finding("guard:rebind", f"builtin '{name}' {how}", node))
        elif name in imported and (how != "imported" or len(imported[name]) > 1):
            findings.append(_finding("guard:rebind", f"'{name}' names an imported module or object and is "
                                     f"{how} again", node))
    return findings


def _builtin_findings(source: str, tree) -> list[dict]:
    """Every name Python resolves to the builtins, in every scope (symtable), must be in ALLOWED_BUILTINS."""
    try:
        top = symtable.symtable(source, "<candidate>", "exec")
    except SyntaxError:
        return []
    module_names = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()
                    or s.is_namespace() or s.is_parameter()}
    used: set[str] = set()
    stack = [top]
    while stack:
        table = stack.pop()
        stack.extend(table.get_children())
        for sym in table.get_symbols():
            name = sym.get_name()
            if sym.is_referenced() and (sym.is_global() or table.get_type() == "module") \
                    and name not in module_names and name in BUILTIN_NAMES:
                used.add(name)
    refused = used - ALLOWED_BUILTINS
    lines = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in refused:
            lines.setdefault(node.id, node)
    return [_finding(BUILTIN_CODES.get(name, "guard:introspection"),
                     f"builtin '{name}' is not on the list of what a candidate may use", lines.get(name))
            for name in sorted(refused)]


def _annotate_parents(tree):
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            child._parent = parent


def analyze(source: str, *, arg_names: tuple[str, ...], dsls: tuple[str, ...],
            forbidden_torch: frozenset[str]) -> tuple[list[dict], dict]:
    """(findings, info); info names the DSL used and the candidate's own kernel functions."""
    info = {"dsl": None, "kernels": []}
    if len(source.encode("utf-8", "replace")) > MAX_SOURCE_BYTES:
        return [_finding("guard:size", f"source is {len(source)} bytes, the limit is {MAX_SOURCE_BYTES}")], info
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return [{"code": "guard:syntax", "message": f"{e.msg}", "line": e.lineno}], info
    _annotate_parents(tree)
    v = _Visitor(forbidden_torch)
    v.visit(tree)
    findings = v.findings + _rebinding_findings(tree) + _builtin_findings(source, tree)

    forward = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "forward"]
    if not forward:
        findings.append(_finding("guard:no_forward", "no module-level def forward(...)"))
    else:
        a = forward[0].args
        positional = len(a.posonlyargs) + len(a.args)
        if a.vararg is None and positional != len(arg_names):
            findings.append(_finding("guard:signature", f"forward takes {positional} arguments, the target "
                                     f"passes {len(arg_names)} ({', '.join(arg_names)})", forward[0]))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in ("PARAMS", "SPACE")
                                                for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
                if not isinstance(value, dict):
                    raise ValueError
            except ValueError:
                findings.append(_finding("guard:params", "PARAMS and SPACE must be dict literals", node))

    uses_triton = bool(v.triton_jit & v.launched)
    uses_cute = bool(v.cute_fns & v.loaded)
    if not ((uses_triton and "triton" in dsls) or (uses_cute and "cute" in dsls)):
        if v.triton_jit and not v.launched & v.triton_jit:
            msg = f"@triton.jit functions ({', '.join(sorted(v.triton_jit))}) are never launched as kernel[grid](...)"
        elif v.cute_fns:
            msg = "CuTe DSL functions are defined but never used"
        else:
            msg = f"no kernel in the allowed DSLs ({', '.join(dsls)})"
        findings.append(_finding("guard:no_dsl", msg))
    findings.sort(key=lambda f: (f["line"] or 0, f["code"]))
    # A candidate may use both (a CuTe DSL logits kernel before a Triton top-k): "triton+cute"
    used = [d for d, on in (("triton", uses_triton), ("cute", uses_cute)) if on and d in dsls]
    info["dsl"] = "+".join(used) or None
    info["kernels"] = sorted((v.triton_jit if "triton" in used else set()) | (v.cute_fns if "cute" in used else set()))
    return findings, info


def check_candidate(source: str, target) -> tuple[list[dict], dict]:
    return analyze(source, arg_names=target.arg_names, dsls=target.dsls, forbidden_torch=target.forbidden_torch)
