"""What a candidate's source may use: the guard's allow-lists and the finding each forbidden road carries
(gpu_worker/pipeline/guard.py applies them; docs/isolation.md says why the guard allows rather than forbids).
Data only: a new allowed name or a new forbidden module is one line here."""

import builtins

from gpu_worker.contract import MAX_SOURCE_BYTES  # noqa: F401  (one limit for the submit form and the guard)

ALLOWED_MODULES = ("torch", "torch.nn", "torch.nn.functional", "triton", "triton.language", "cutlass",
                   "math", "functools", "typing", "itertools", "dataclasses", "__future__",
                   "cuda.bindings.driver")
# What a kernel file's Python needs from the builtins: numbers, containers, loops, errors. No reflection
# (type, getattr, hasattr, vars, dir, id), no code or file access, nothing that reaches a frame.
ALLOWED_BUILTINS = frozenset({
    "abs", "all", "any", "bool", "dict", "divmod", "enumerate", "filter", "float", "frozenset", "int",
    "isinstance", "issubclass", "iter", "len", "list", "map", "max", "min", "next", "pow", "print", "range",
    "reversed", "round", "set", "slice", "sorted", "str", "sum", "tuple", "zip", "bytes", "complex",
    "callable", "staticmethod", "classmethod", "property", "object", "super", "repr", "format", "hash",
    "hasattr",  # a feature probe (best.py: tl.extra.cuda.gdc_wait); it returns a bool, never the object
    "True", "False", "None", "Ellipsis", "NotImplemented",
    "Exception", "ValueError", "TypeError", "RuntimeError", "NotImplementedError", "AssertionError",
    "KeyError", "IndexError", "ZeroDivisionError", "ArithmeticError", "OverflowError", "LookupError",
})
BUILTIN_NAMES = frozenset(dir(builtins))
# torch.<name> a candidate may use: tensor creation, dtypes, shapes and devices; compute is the kernel's.
TORCH_ALLOWED = frozenset({
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "arange", "tensor", "as_tensor", "Tensor", "Size", "device", "dtype", "finfo", "iinfo", "cuda", "nn",
    "float32", "float", "float16", "half", "bfloat16", "float64", "double", "float8_e4m3fn", "float8_e5m2",
    "float8_e4m3fnuz", "float8_e5m2fnuz", "int8", "uint8", "int16", "int32", "int", "int64", "long", "uint16",
    "uint32", "uint64", "bool", "complex64", "strided", "contiguous_format", "is_tensor", "is_floating_point",
    "numel", "broadcast_shapes",
})
# Attributes of streams, events, graphs and raw handles, refused on any object: the harness times and
# synchronises; a candidate that reaches a stream by another road is stopped here.
STREAM_ATTRIBUTES = frozenset({
    "cuda_stream", "stream_id", "synchronize", "wait_stream", "wait_event", "record_event", "record_stream",
    "query", "elapsed_time", "replay", "capture_begin", "capture_end", "set_stream", "_as_parameter_",
    "ipc_handle", "_cdata", "cudaStream_t",
})
# torch.<sub> modules that carry their own finding when imported or used
TORCH_SUBMODULE_CODES = {
    "torch.utils.cpp_extension": "guard:native_code", "torch.library": "guard:native_code",
    "torch.ops": "guard:torch_fallback", "torch.compile": "guard:torch_fallback",
    "torch.jit": "guard:torch_fallback", "torch.cuda.jiterator": "guard:native_code",
    "torch.backends": "guard:torch_flags", "torch.profiler": "guard:harness",
    "torch.autograd.profiler": "guard:harness", "torch.multiprocessing": "guard:thread",
    "torch.distributed": "guard:network", "torch.hub": "guard:network", "torch.load": "guard:file",
    "torch.save": "guard:file", "torch.from_file": "guard:file", "torch.manual_seed": "guard:torch_flags",
    "torch.seed": "guard:torch_flags", "torch.random": "guard:torch_flags",
    "torch.use_deterministic_algorithms": "guard:torch_flags",
}
# triton.<sub> modules that carry their own finding. Triton's options (debug mode, compile flags, hooks,
# the environment it reads them from) are process-wide: the benchmark child compiles the incumbent and the
# default in the same process, so a candidate that changed them would change the kernels it is compared with.
# Its driver hands out raw streams and device state, its cache and compiler write and load the binaries every
# kernel of the process runs (the incumbent's too), its testing module times: none is a kernel file's business.
TRITON_SUBMODULE_CODES = {"triton.knobs": "guard:torch_flags", "triton.runtime.driver": "guard:stream",
                          "triton.runtime.cache": "guard:file", "triton.runtime.build": "guard:native_code",
                          "triton.compiler": "guard:native_code", "triton.backends": "guard:native_code",
                          "triton.testing": "guard:harness"}
TORCH_CUDA_ALLOWED = {"current_stream", "current_device", "get_device_properties", "device_count",
                      "is_available", "get_device_capability"}
MODULE_CODES = {
    "threading": "guard:thread", "_thread": "guard:thread", "multiprocessing": "guard:thread",
    "concurrent": "guard:thread", "asyncio": "guard:thread", "sched": "guard:thread",
    "subprocess": "guard:subprocess", "pty": "guard:subprocess", "signal": "guard:subprocess",
    "socket": "guard:network", "ssl": "guard:network", "http": "guard:network", "urllib": "guard:network",
    "requests": "guard:network", "ftplib": "guard:network", "smtplib": "guard:network",
    "xmlrpc": "guard:network", "selectors": "guard:network", "select": "guard:network",
    "os": "guard:env", "posix": "guard:env", "sys": "guard:introspection",
    "pathlib": "guard:file", "shutil": "guard:file", "io": "guard:file", "tempfile": "guard:file",
    "glob": "guard:file", "fileinput": "guard:file", "pickle": "guard:file", "shelve": "guard:file",
    "sqlite3": "guard:file", "mmap": "guard:ctypes", "ctypes": "guard:ctypes", "cffi": "guard:ctypes",
    "importlib": "guard:exec", "builtins": "guard:exec", "runpy": "guard:exec", "code": "guard:exec",
    "codeop": "guard:exec", "imp": "guard:exec", "pkgutil": "guard:exec", "marshal": "guard:exec",
    "gc": "guard:introspection", "inspect": "guard:introspection", "weakref": "guard:introspection",
    "traceback": "guard:introspection", "atexit": "guard:introspection",
    "time": "guard:harness", "timeit": "guard:harness", "gpu_worker": "guard:harness", "ark": "guard:harness",
    "loop": "guard:harness", "console": "guard:harness", "pytest": "guard:harness", "celery": "guard:harness",
    "django": "guard:harness", "numpy": "guard:torch_fallback", "scipy": "guard:torch_fallback",
}
BUILTIN_CODES = {
    "exec": "guard:exec", "eval": "guard:exec", "compile": "guard:exec", "__import__": "guard:exec",
    "open": "guard:file", "input": "guard:file", "breakpoint": "guard:introspection",
    "globals": "guard:introspection", "locals": "guard:introspection", "vars": "guard:introspection",
    "getattr": "guard:introspection", "setattr": "guard:introspection", "delattr": "guard:introspection",
    "__builtins__": "guard:introspection", "__loader__": "guard:introspection", "__spec__": "guard:introspection",
    "memoryview": "guard:introspection", "exit": "guard:subprocess", "quit": "guard:subprocess",
}
# Attributes that reach a module or a frame through an allowed name (torch.os, dataclasses.sys,
# dataclasses.inspect.currentframe().f_back): each is the forbidden import by another road.
MODULE_ATTRIBUTE_CODES = {
    "os": "guard:env", "posix": "guard:env", "sys": "guard:introspection", "builtins": "guard:exec",
    "inspect": "guard:introspection", "gc": "guard:introspection", "weakref": "guard:introspection",
    "traceback": "guard:introspection", "importlib": "guard:exec", "runpy": "guard:exec", "marshal": "guard:exec",
    "subprocess": "guard:subprocess", "threading": "guard:thread", "_thread": "guard:thread",
    "multiprocessing": "guard:thread", "ctypes": "guard:ctypes", "socket": "guard:network",
    "pathlib": "guard:file", "shutil": "guard:file", "pickle": "guard:file",
}
FRAME_ATTRIBUTES = {"f_back", "f_locals", "f_globals", "f_builtins", "f_code", "tb_frame", "tb_next", "gi_frame",
                    "cr_frame", "ag_frame", "currentframe", "_getframe"}
# Access by a name in a string: operator.attrgetter("topk")(torch) hides what is reached.
STRING_ACCESS = {"attrgetter", "methodcaller"}
OS_CODES = {"environ": "guard:env", "environb": "guard:env", "getenv": "guard:env", "putenv": "guard:env",
            "unsetenv": "guard:env", "system": "guard:subprocess", "popen": "guard:subprocess",
            "fork": "guard:subprocess", "kill": "guard:subprocess", "_exit": "guard:subprocess"}
# What a kernel file takes from the standard library modules it may import; math and itertools are pure
# functions of their arguments and are allowed whole. typing.get_type_hints, typing.ForwardRef and
# functools.singledispatch evaluate annotation strings: an eval the syntax tree does not show.
STDLIB_ALLOWED = {
    "typing": frozenset({"Any", "Optional", "Union", "Tuple", "List", "Dict", "Set", "FrozenSet", "Sequence",
                         "Mapping", "Iterable", "Iterator", "Callable", "Literal", "Final", "ClassVar",
                         "TYPE_CHECKING", "TypeVar", "cast", "overload", "NamedTuple"}),
    "functools": frozenset({"partial", "reduce", "lru_cache", "cache", "wraps", "cached_property", "cmp_to_key",
                            "total_ordering"}),
    "dataclasses": frozenset({"dataclass", "field", "fields", "replace", "asdict", "astuple", "is_dataclass",
                              "InitVar", "KW_ONLY", "MISSING"}),
}
STRING_EVALUATORS = {"get_type_hints", "ForwardRef", "_eval_type", "evaluate_forward_ref", "singledispatch",
                     "singledispatchmethod", "make_dataclass"}
# Reading a whole tensor on the host: the work is the kernel's, and neither is an aten op the op recorder
# would see (a scalar read, .item() or float(t), is one: verify_child refuses it at run time).
HOST_READS = {"tolist", "numpy"}
# Roots whose attribute chains the guard follows through the real modules (torch, triton, CuTe DSL and the
# standard modules above): a name those packages imported for themselves (triton...compiler.Path,
# triton.runtime.interpreter.np) is the forbidden module by another road.
RESOLVED_ROOTS = ("torch", "triton", "cutlass", "math", "functools", "itertools", "typing", "dataclasses")
LAZY_NAMES = {"as_subclass", "_make_subclass", "_make_wrapper_subclass", "__torch_function__",
              "__torch_dispatch__"}
# The one dunder method a candidate may define: every other one (__iter__, __len__, __del__, __eq__,
# __init_subclass__, __getattr__...) is code Python runs when the harness touches the object, outside the
# call the harness watches.
ALLOWED_DUNDER_DEFS = {"__init__"}
PLAIN_TYPES = (int, float, complex, str, bytes, bool, type(None), tuple, list, dict, set, frozenset)
