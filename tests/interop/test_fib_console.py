"""The console's FlashInfer-Bench pages: the import form (a refused import re-shows the form with the reason,
never a 500), a viewer may not import, and a run on a built-in target says why it cannot export."""

import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

pytest.importorskip("flashinfer_bench", reason="the fib extra (flashinfer-bench) is not installed")

DEF_PATH = Path(__file__).resolve().parents[2] / "gpu_worker" / "fib" / "definitions" / "fused_add_rmsnorm_h2048.json"


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def upload(text: str, name="def.json"):
    return SimpleUploadedFile(name, text.encode(), content_type="application/json")


def test_import_form_refuses_with_reasons_and_imports(alice, charlie):
    from loop.models import Target

    as_alice = client_for(alice)
    page = as_alice.get("/theses/")
    assert b'data-testid="import-definition"' in page.content
    assert as_alice.get("/targets/import/").status_code == 200
    refused = as_alice.post("/targets/import/", {"definition": upload(DEF_PATH.read_text()), "ranges": "batch_size=1-9"})
    assert refused.status_code == 200 and b"expected axis=lo:hi" in refused.content
    refused = as_alice.post("/targets/import/", {"definition": upload("{not json")})
    assert refused.status_code == 200 and b"not JSON" in refused.content
    refused = as_alice.post("/targets/import/", {"definition": upload(DEF_PATH.read_text())})
    assert refused.status_code == 200 and b"no operating range for var axis batch_size" in refused.content
    assert not Target.objects.filter(name="fused_add_rmsnorm_h2048").exists()
    assert client_for(charlie).post("/targets/import/", {"definition": upload(DEF_PATH.read_text()),
                                                          "ranges": "batch_size=1:64"}).status_code == 403
    done = as_alice.post("/targets/import/", {"definition": upload(DEF_PATH.read_text()), "ranges": "batch_size=1:64",
                                              "atol": "0.005"})
    assert done.status_code == 302 and done["Location"].endswith("/theses/new/")
    target = Target.objects.get(name="fused_add_rmsnorm_h2048")
    assert target.axes == {"batch_size": [1, 64]} and target.document["tolerance"]["atol"] == 0.005
    assert json.loads(json.dumps(target.document))["definition"]["name"] == target.name
    # the console's check runs the guard on an imported target too
    from loop.guard_check import source_check
    from loop.services.targets import target_contract

    kernel = (DEF_PATH.parents[2] / "candidates" / "add_rmsnorm" / "seed.py").read_text().replace(
        "def forward(x, residual, weight, eps):", "def _forward_eps(x, residual, weight, eps):") + (
        "\n\ndef forward(hidden_states, residual, weight):\n    return _forward_eps(hidden_states, residual, weight, 1e-6)\n")
    assert source_check(kernel.replace("(hidden_states, residual, weight):", "(x, r, w, eps):"), target)["findings"]
    assert source_check(kernel, target)["ok"], source_check(kernel, target)
    cheat = kernel.replace("h = torch.empty_like(x2)", "h = torch.nn.functional.rms_norm(x2, (x2.shape[-1],))")
    assert any("rms_norm" in f["message"] for f in source_check(cheat, target)["findings"])
    assert target_contract(target)["args"] == ["hidden_states", "residual", "weight"]


def test_a_builtin_targets_run_has_no_export_button_and_the_export_says_why(alice):
    from loop.models import Run, Target, Thesis

    target = Target.objects.create(name="add_rmsnorm", axes={"tokens": [1, 16384], "hidden": [2048, 8192]})
    thesis = Thesis.objects.create(title="t", body="b", target=target, hardware="h200", owner=alice)
    run = Run.objects.create(thesis=thesis, hardware="h200", proposer="human", created_by=alice)
    as_alice = client_for(alice)
    assert b'data-testid="export-traceset"' not in as_alice.get(f"/runs/{run.pk}/").content
    answer = as_alice.post(f"/runs/{run.pk}/traceset.zip", follow=True)
    assert answer.status_code == 200 and b"built-in target" in answer.content


def test_the_indexer_imports_with_its_generators_and_check_and_the_page_lists_them(alice):
    from loop.models import Target

    defs = DEF_PATH.parent
    name = "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"
    sidecar = json.loads((defs / f"{name}.inputs.json").read_text())
    as_alice = client_for(alice)
    form = {"definition": upload((defs / f"{name}.json").read_text()),
            "ranges": "batch_size=1:128\nnum_pages=64:8192\nmax_num_pages=1:4096"}
    refused = as_alice.post("/targets/import/", {**form, "inputs": '{"seq_lens": {"kind": "zipf"}}'})
    assert refused.status_code == 200 and b"unknown generator kind" in refused.content
    refused = as_alice.post("/targets/import/", {**form, "definition": upload((defs / f"{name}.json").read_text()),
                                                 "inputs": "[1]"})
    assert refused.status_code == 200 and b"A JSON object" in refused.content
    assert not Target.objects.filter(name=name).exists()
    done = as_alice.post("/targets/import/", {**form, "definition": upload((defs / f"{name}.json").read_text()),
                                              "inputs": json.dumps(sidecar["inputs"]), "check": sidecar["check"]},
                         follow=True)
    assert done.status_code == 200 and b"drawn by ark: seq_lens (lengths)" in done.content
    target = Target.objects.get(name=name)
    assert target.document["inputs"] == sidecar["inputs"] and target.document["check"] == "dsa_indexer_topk_fp8"
    page = as_alice.get("/targets/import/").content.decode()
    assert 'data-testid="fib-imported-' + name in page
    assert "block_table: ark: page_table lengths=seq_lens cache=k_index_cache_fp8" in page
    assert "q_index_fp8: FlashInfer-Bench" in page and "dsa_indexer_topk_fp8&#x27;s check" in page


def test_captured_inputs_in_the_workloads_are_named_as_not_read(alice):
    from loop.models import Event

    captured = {"type": "safetensors", "path": "blob/calls.safetensors", "tensor_key": "residual_0"}
    lines = [json.dumps({"definition": "fused_add_rmsnorm_h2048", "workload": {
        "axes": {"batch_size": b}, "inputs": {"residual": captured} if i else {}, "uuid": f"c{i}"}})
        for i, b in enumerate((4, 8, 8))]
    done = client_for(alice).post("/targets/import/", {
        "definition": upload(DEF_PATH.read_text()), "ranges": "batch_size=1:64",
        "workloads": upload("\n".join(lines), "workloads.jsonl")}, follow=True)
    assert done.status_code == 200
    assert b"captured inputs ark does not read (residual on 2 lines)" in done.content
    event = Event.objects.filter(type="target.imported").latest("pk")
    assert event.payload["captured_inputs_not_read"] == {"residual": 2}
