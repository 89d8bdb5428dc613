"""The guard's allowlists hold where a path leaves the syntax tree: names other packages re-export, standard
modules that evaluate strings, methods Python calls on its own, host reads of tensor values and format
fields (docs/isolation.md, Layer 1)."""

import textwrap

from gpu_worker.pipeline.guard import check_candidate
from gpu_worker.targets import get_target

TOPK = get_target("dsa_topk")

BASE = textwrap.dedent('''\
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def _k(out_ptr, K, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, offs, mask=offs < K)


    def forward(logits, lengths, k):
        out = torch.empty((logits.shape[0], k), dtype=torch.int32, device=logits.device)
        _k[(1,)](out, k, BLOCK=1024)
        return out
    ''')
FIRST = BASE.count("\n") + 1  # the line an appended snippet starts on


def _found(snippet: str) -> set[tuple[str, int]]:
    findings, _ = check_candidate(BASE + snippet + "\n", TOPK)
    return {(f["code"], f["line"]) for f in findings}


def _codes(snippet: str) -> set[str]:
    return {code for code, _ in _found(snippet)}


def test_the_base_candidate_is_clean():
    assert _found("") == set()


def test_a_module_or_class_another_package_imported_is_the_forbidden_import():
    # numpy through Triton's interpreter, pathlib through Triton's NVIDIA backend, tempfile likewise
    assert ("guard:torch_fallback", FIRST) in _found("np = triton.runtime.interpreter.np")
    assert ("guard:file", FIRST) in _found("t = triton.tools.disasm.tempfile")
    assert ("guard:file", FIRST) in _found("from triton.tools.disasm import tempfile")
    # Triton's compiler (where pathlib is re-exported too) is refused as a whole: it builds every binary
    assert ("guard:native_code", FIRST) in _found("p = triton.backends.nvidia.compiler.Path")


def test_a_path_that_passes_through_torch_again_is_judged_as_torch():
    # torch.nn.functional.torch is torch itself: torch.cat is not on the allowlist by either spelling
    assert "guard:torch_fallback" in _codes("c = torch.nn.functional.torch.cat")
    assert _codes("c = torch.nn.functional.torch.empty") == set()
    assert _codes("v = torch.Tensor.view\nd = torch.float32\ne = math.inf".replace("e = ", "import math\ne = ")) == set()


def test_standard_modules_give_only_what_a_kernel_file_needs():
    assert ("guard:exec", FIRST + 1) in _found("import typing\nh = typing.get_type_hints")
    assert "guard:exec" in _codes("from functools import singledispatch")
    assert "guard:exec" in _codes("import typing\nr = typing.ForwardRef('x')")
    assert "guard:forbidden_import" in _codes("import dataclasses\nt = dataclasses.types")
    clean = "import functools\nimport typing\nimport math\nimport itertools\nfrom dataclasses import dataclass\n" \
            "P = functools.partial(max, 1)\nO = typing.Optional[int]\nR = math.sqrt(2.0)\nC = itertools.chain"
    assert _codes(clean) == set()


def test_methods_python_calls_on_its_own_are_refused_but_init_is_not():
    for method in ("__iter__", "__len__", "__del__", "__eq__", "__init_subclass__", "__index__"):
        src = f"class Out(tuple):\n    def {method}(self, *a):\n        return 0"
        assert ("guard:introspection", FIRST + 1) in _found(src), method
    assert ("guard:introspection", FIRST) in _found("def __getattr__(name):\n    return 0")
    assert "guard:introspection" in _codes("class M(type):\n    pass\nclass C(metaclass=M):\n    pass")
    assert _codes("class Plan:\n    def __init__(self, n):\n        self.n = n") == set()


def test_reading_tensor_values_on_the_host_is_a_fallback():
    for read in ("logits.tolist()", "logits.numpy()"):
        assert ("guard:torch_fallback", FIRST) in _found(f"v = {read}"), read
        assert ("guard:torch_fallback", FIRST) in _found(f"f = {read.split('(')[0]}"), read


def test_a_format_field_that_reaches_attributes_is_refused_outside_docstrings():
    assert ("guard:introspection", FIRST) in _found("s = '{0.__class__}'.format(1)")
    assert ("guard:introspection", FIRST) in _found("s = '{0[torch]}'.format_map")
    assert _codes("s = '{} rows, {:>8}'.format(1, 2)") == set()
    assert _codes("def g():\n    '''Formats {x.y} in prose only.'''\n    return 1") == set()


def test_a_class_pattern_that_reads_attributes_is_refused():
    src = "def g(m):\n    match m:\n        case object(os=o):\n            return o\n    return None"
    assert ("guard:introspection", FIRST + 2) in _found(src)
    assert "guard:introspection" in _codes("def g(m):\n    match m:\n        case complex(r, i):\n            return r")
    assert _codes("def g(m):\n    match m:\n        case int():\n            return 1\n        case _:\n"
                  "            return 0") == set()


def test_a_module_used_as_a_value_is_refused_wherever_the_names_lose_it():
    # in a container, unpacked, as a default, returned by a lambda, as a loop variable, as an argument
    for snippet in ("_m = [torch]\nx = _m[0].cuda.is_current_stream_capturing()",
                    "(_t,) = (torch,)", "_d = {'t': torch.cuda}", "def g(m=torch.cuda):\n    return m",
                    "g = lambda: tl", "for _t in (torch,):\n    pass", "x = len([triton.language])",
                    "_m: object = torch", "class A:\n    m = torch\nx = A.m.cuda.is_current_stream_capturing()",
                    "class A:\n    import math as mm\nx = A.mm.sqrt(2)", "def g():\n    m = torch.cuda\n    return m"):
        assert "guard:introspection" in _codes(snippet), snippet
    # named: the base of an attribute, a plain alias the guard follows, a hasattr probe (a bool)
    for snippet in ("x = torch.int32", "lang = triton.language\ny = lang.float32",
                    "p = hasattr(tl.extra.cuda, 'gdc_wait')", "dtypes = [torch.float32, torch.bfloat16]"):
        assert _codes(snippet) == set(), snippet


def test_an_attribute_store_is_the_candidates_own_self_only():
    for snippet in ("_c = [torch.Tensor]\n_c[0].clone = len", "def g(o):\n    o.x = 1",
                    "class K:\n    def f(self, o):\n        o.x = 1",
                    "class K:\n    def f(self):\n        self = [torch.Tensor][0]\n        self.x = 1",
                    "class K:\n    def f(self):\n        def inner():\n            self.x = 1\n        return inner",
                    "def g(self):\n    self.x = 1"):
        assert "guard:harness" in _codes(snippet), snippet
    assert _codes("class K:\n    def __init__(self, n):\n        self.n = n\n        self.n += 1") == set()


def test_tritons_process_wide_options_are_the_harnesss():
    for snippet in ("x = triton.knobs.runtime.debug", "triton.knobs.setenv('TRITON_DEBUG', '1')",
                    "triton.knobs.runtime.launch_enter_hook.add(len)", "from triton import knobs",
                    "x = [triton.knobs.runtime]"):
        assert "guard:torch_flags" in _codes(snippet), snippet
    # the driver (raw streams), the binary cache and the compiler (what every kernel of the process loads)
    assert "guard:stream" in _codes("s = triton.runtime.driver.active.get_current_stream()")
    assert "guard:file" in _codes("m = triton.runtime.cache.get_cache_manager('key')")
    assert "guard:native_code" in _codes("from triton.compiler import ASTSource")
    assert "guard:harness" in _codes("t = triton.testing.do_bench")
    assert _codes("c = triton.Config({'BLOCK': 64})\nn = triton.cdiv(7, 2) + triton.next_power_of_2(5)") == set()
