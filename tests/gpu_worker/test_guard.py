"""Static guard findings carry a code and the line they are on."""

import textwrap

from gpu_worker.pipeline.guard import check_candidate
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
    assert {c for c, _ in _codes("x = 1\n" * 20000)} == {"guard:size"}
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
