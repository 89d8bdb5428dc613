"""Static guard findings carry a code and the line they are on."""

import textwrap

from gpu_worker.pipeline.guard import analyze, check_candidate
from gpu_worker.targets import get_target

TOPK = get_target("dsa_topk")
RMS = get_target("add_rmsnorm")

HONEST = textwrap.dedent('''\
    import torch
    import triton
    import triton.language as tl

    PARAMS = {"BLOCK": 1024}


    @triton.jit
    def _k(x_ptr, out_ptr, K, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, offs, mask=offs < K)


    def forward(logits, lengths, k):
        out = torch.empty((logits.shape[0], k), dtype=torch.int32, device=logits.device)
        _k[(1,)](logits, out, k, BLOCK=PARAMS["BLOCK"])
        return out
    ''')


def _codes(source, target=TOPK):
    findings, _ = check_candidate(source, target)
    return {(f["code"], f["line"]) for f in findings}


def test_a_clean_candidate_has_no_findings_and_names_its_kernel():
    findings, info = check_candidate(HONEST, TOPK)
    assert findings == []
    assert info == {"dsl": "triton", "kernels": ["_k"]}


def test_forbidden_torch_op_is_reported_on_its_line():
    src = HONEST.replace("    return out\n", "    return torch.topk(logits, k).indices\n")
    assert ("guard:torch_fallback", 17) in _codes(src)


def test_tensor_method_of_the_replaced_op_is_a_fallback():
    src = HONEST.replace("    return out\n", "    return logits.argsort(dim=1)[:, :k]\n")
    assert ("guard:torch_fallback", 17) in _codes(src)


def test_rms_norm_target_forbids_its_own_ops_but_not_topk():
    src = HONEST.replace("def forward(logits, lengths, k):", "def forward(x, residual, weight, eps):") \
        .replace("    return out\n", "    return torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, eps)\n")
    assert ("guard:torch_fallback", 17) in _codes(src, RMS)


def test_each_forbidden_family_gets_its_code():
    cases = {
        "import threading": "guard:thread", "import os\nos.environ['A']": "guard:env",
        "open('x')": "guard:file", "import socket": "guard:network", "import subprocess": "guard:subprocess",
        "exec('1')": "guard:exec", "import ctypes": "guard:ctypes", "s = torch.cuda.Stream()": "guard:stream",
        "torch.cuda.graph": "guard:stream", "import gpu_worker": "guard:harness", "torch.cuda.synchronize()": "guard:stream",
        "torch.backends.cudnn.benchmark = True": "guard:torch_flags", "x = globals()": "guard:introspection",
        "y = (1).__class__": "guard:introspection", "import numpy": "guard:torch_fallback",
        "from torch.utils.cpp_extension import load_inline": "guard:native_code", "import time": "guard:harness",
        "torch.manual_seed(0)": "guard:torch_flags", "triton.jit = None": "guard:harness",
    }
    for snippet, code in cases.items():
        src = HONEST + "\n" + snippet + "\n"
        first = HONEST.count("\n") + 2
        lines = range(first, first + snippet.count("\n") + 1)
        found = _codes(src)
        assert any(c == code and ln in lines for c, ln in found), (snippet, found)


def test_syntax_error_size_missing_forward_signature_and_no_dsl():
    assert _codes("def forward(:\n") == {("guard:syntax", 1)}
    assert {c for c, _ in _codes("x = 1\n" * 30000)} == {"guard:size"}  # 180 KB
    assert "guard:no_forward" in {c for c, _ in _codes(HONEST.replace("def forward", "def fwd"))}
    assert ("guard:signature", 14) in _codes(HONEST.replace("def forward(logits, lengths, k)", "def forward(logits, k)"))
    no_launch = HONEST.replace('    _k[(1,)](logits, out, k, BLOCK=PARAMS["BLOCK"])\n', "")
    assert "guard:no_dsl" in {c for c, _ in _codes(no_launch)}


def test_params_must_be_a_dict_literal():
    assert ("guard:params", 5) in _codes(HONEST.replace('PARAMS = {"BLOCK": 1024}', "PARAMS = dict(BLOCK=1024)"))


def test_the_seed_candidates_pass_the_guard():
    for name in ("dsa_topk", "dsa_indexer_topk", "add_rmsnorm"):
        target = get_target(name)
        for path in target.seed_paths():
            if path.exists():
                findings, info = check_candidate(path.read_text(), target)
                assert findings == [], (path, findings)
                assert info["dsl"] in ("triton", "cute")


# --- the allowlists hold for every kernel the project has and stop every guard exploit ---------------

from pathlib import Path

from tests.redteam.catalog import load

ROOT = Path(__file__).resolve().parents[2]
REDTEAM = ROOT / "tests/redteam/candidates"


def _kernel_files():
    """Seeds and bests (a target's folder under gpu_worker/candidates) and the honest red-team candidates, as
    (name, source, target): a red-team candidate's source as the harness receives it (tests/redteam/catalog.py
    assembles a kernel + shortcut one)."""
    from gpu_worker.targets import TARGETS

    for path in sorted((ROOT / "gpu_worker/candidates").glob("*/*.py")):
        if path.parent.name in TARGETS and (path.stem in ("seed", "best") or path.stem.startswith("seed_")):
            yield path.name, path.read_text(), path.parent.name
    for path in sorted(REDTEAM.glob("honest_*.py")):
        c = load(path)
        yield path.name, c.source, c.target


def test_no_seed_best_or_honest_candidate_is_rejected():
    files = list(_kernel_files())
    assert len(files) >= 8
    for name, source, target in files:
        findings, _ = check_candidate(source, get_target(target))
        assert findings == [], (name, findings)


def test_every_guard_exploit_gets_one_of_its_codes_and_no_other_exploit_is_stopped_by_the_guard():
    for path in sorted(REDTEAM.glob("*.py")):
        c = load(path)
        expect = list(c.expect)
        if expect == ["pass"] or c.gpu_only:
            continue  # honest files: above; GPU exploits may also meet the guard first (their header says)
        codes = {f["code"] for f in check_candidate(c.source, get_target(c.target))[0]}
        guard_codes = {code for code in expect if code.startswith("guard:")}
        if guard_codes:
            assert codes & guard_codes, (path.name, codes)
        else:
            assert not codes, (path.name, codes)  # a runtime exploit must reach the runtime check it is for


def test_rebinding_an_import_or_a_builtin_is_refused_in_every_form():
    forms = ["tl = torch", "del tl", "tl += 1", "(tl := torch)", "for tl in range(2):\n    pass",
             "try:\n    pass\nexcept Exception as tl:\n    pass", "import torch as tl", "def f():\n    global tl\n    tl = 1",
             "len = 3", "def f(open=1):\n    return open", "class sorted:\n    pass", "with torch.no_grad() as len:\n    pass",
             "def f():\n    nonlocal_ = [x for len in range(3) for x in (len,)]"]
    for form in forms:
        assert "guard:rebind" in {c for c, _ in _codes(HONEST + "\n" + form + "\n")}, form


def test_builtins_are_resolved_by_scope():
    # a name that shadows nothing is fine; a refused builtin is refused wherever Python would find it
    assert _codes(HONEST + "\ndef g(x):\n    return len(x) + max(x)\n") == set()
    for name in ("type", "id", "vars", "getattr", "dir", "globals", "compile", "open", "__import__"):
        found = {c for c, _ in _codes(HONEST + f"\ndef g(x):\n    return {name}\n")}
        assert found and found <= {"guard:introspection", "guard:exec", "guard:file"}, (name, found)


def test_torch_names_come_from_an_allowlist_and_stream_attributes_from_nowhere():
    assert ("guard:torch_fallback", 17) in _codes(HONEST.replace("    return out\n", "    return torch.cat([out])\n"))
    for attr in ("cuda_stream", "synchronize", "wait_stream", "record_stream", "elapsed_time", "replay"):
        src = HONEST.replace("    return out\n", f"    h = out.{attr}\n    return out\n")
        assert ("guard:stream", 17) in _codes(src), attr


def test_aliases_and_bound_methods_are_resolved():
    src = HONEST + "\nc = torch.cuda\nc.synchronize()\n"
    assert any(code == "guard:stream" for code, _ in _codes(src))
    src = HONEST.replace("    return out\n", "    pick = logits.topk\n    return out\n")
    assert ("guard:torch_fallback", 17) in _codes(src)


def test_a_candidate_using_both_dsls_names_both_and_their_kernels():
    # the FP8 indexer's best: logits by a CuTe kernel, the top-k by Triton kernels
    target = get_target("dsa_indexer_topk_fp8")
    path = target.seed_paths()[0].parent / "best.py"
    findings, info = check_candidate(path.read_text(), target)
    assert findings == []
    assert info["dsl"] == "triton+cute"
    assert {"_launch", "_to_global", "_kb_filter"} <= set(info["kernels"])
    # a target that allows only Triton takes the Triton part alone
    _, only_triton = analyze(path.read_text(), arg_names=target.arg_names, dsls=("triton",),
                             forbidden_torch=target.forbidden_torch)
    assert only_triton["dsl"] == "triton" and "_launch" not in only_triton["kernels"]


def test_the_source_limit_is_one_number_for_the_submit_form_and_the_guard():
    from gpu_worker.contract import MAX_SOURCE_BYTES
    from gpu_worker.pipeline import guard_rules
    from loop.services import candidates
    assert guard_rules.MAX_SOURCE_BYTES is MAX_SOURCE_BYTES and candidates.MAX_SOURCE_BYTES is MAX_SOURCE_BYTES
    findings, _ = check_candidate(HONEST + "#" * MAX_SOURCE_BYTES, TOPK)
    assert [f["code"] for f in findings] == ["guard:size"]
