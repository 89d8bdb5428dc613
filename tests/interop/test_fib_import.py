"""The web side's FlashInfer-Bench commands: import a Definition with workloads as a target and its workload
profile, send its document with every evaluation, export a run as a TraceSet, and write the apply-ready
TraceSet on promotion (docs/interop.md). The package itself runs in `python -m gpu_worker.fib` children."""

import hashlib
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

pytest.importorskip("flashinfer_bench", reason="the fib extra (flashinfer-bench) is not installed")

from flashinfer_bench import TraceSet

ROOT = Path(__file__).resolve().parents[2]
DEF = "fused_add_rmsnorm_h7168"
DEF_PATH = ROOT / "gpu_worker" / "fib" / "definitions" / f"{DEF}.json"


@pytest.fixture
def workloads(tmp_path):
    path = tmp_path / "workloads.jsonl"
    rows = [1, 1, 1, 1, 64, 64, 2048]
    path.write_text("\n".join(json.dumps({"definition": DEF, "workload": {
        "axes": {"batch_size": b}, "inputs": {}, "uuid": f"u{i}"}}) for i, b in enumerate(rows)) + "\n")
    return path


@pytest.fixture
def imported(db, alice, workloads):
    from loop.models import Target

    call_command("import_definition", str(DEF_PATH), "--workloads", str(workloads), "--range", "batch_size=1:8192",
                 "--user", "alice")
    return Target.objects.get(name=DEF)


def test_bad_imports_say_what_is_wrong(db, alice, workloads, tmp_path):
    with pytest.raises(CommandError, match="outside the operating range"):
        call_command("import_definition", str(DEF_PATH), "--workloads", str(workloads),
                     "--range", "batch_size=1:100", "--user", "alice")
    with pytest.raises(CommandError, match="no operating range for var axis batch_size"):
        call_command("import_definition", str(DEF_PATH), "--user", "alice")
    with pytest.raises(CommandError, match="expected axis=lo:hi"):
        call_command("import_definition", str(DEF_PATH), "--range", "batch_size=1-9", "--user", "alice")
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({**json.loads(DEF_PATH.read_text()), "reference": "def not_run(): pass"}))
    with pytest.raises(CommandError, match="top-level function named 'run'"):
        call_command("import_definition", str(broken), "--range", "batch_size=1:9", "--user", "alice")


def test_a_builtin_target_cannot_be_replaced_by_an_import(db, alice, tmp_path):
    from loop.models import Target

    Target.objects.create(name=DEF, axes={"batch_size": [1, 2]})
    with pytest.raises(CommandError, match="built-in target"):
        call_command("import_definition", str(DEF_PATH), "--range", "batch_size=1:9", "--user", "alice")


def _run_with_evaluation(target, alice):
    from loop.models import Candidate, Evaluation, Run, Thesis

    thesis = Thesis.objects.create(title="t", body="b", target=target, hardware="h200", owner=alice)
    run = Run.objects.create(thesis=thesis, hardware="h200", proposer="human", created_by=alice)
    source = "def forward(hidden_states, residual, weight):\n    return hidden_states, residual\n"
    cand = Candidate.objects.create(run=run, number=1, source=source, source_hash="sha256:x", proposer="human",
                                    status="kept", attempt=1)
    report = json.loads((ROOT / "bench/results/h200/reports/add_rmsnorm__seed.json").read_text())
    for stage in ("verify", "benchmark"):
        shapes = [s for s in report["stages"][stage]["shapes"] if s["shape"].get("hidden") == 7168]
        for s in shapes:
            s["shape"] = {"batch_size": s["shape"]["tokens"]}
        report["stages"][stage]["shapes"] = shapes
    Evaluation.objects.create(candidate=cand, attempt=1, report=report)
    return run, cand, len(report["stages"]["benchmark"]["shapes"])


def test_export_of_a_builtin_target_says_why_not(db, alice, tmp_path):
    from loop.models import Target

    run, _, _ = _run_with_evaluation(Target.objects.create(name="add_rmsnorm", axes={}), alice)
    with pytest.raises(CommandError, match="built-in target"):
        call_command("export_traceset", "--run", str(run.pk), "--out", str(tmp_path / "ts"))


def test_import_spec_export_and_promotion_of_an_imported_target(imported, alice, dana, settings, tmp_path):
    """One import (each FlashInfer-Bench call is a child process that loads torch: seconds each)."""
    from loop.models import Event, WorkloadProfile

    assert imported.axes == {"batch_size": [1, 8192]} and imported.document["schema"] == "ark.fib-target/1"
    profile = WorkloadProfile.objects.get(target=imported)
    assert {c["shape"]["batch_size"]: c["weight"] for c in profile.cells} == {1: 4.0, 64: 2.0, 2048: 1.0}
    assert Event.objects.filter(type="target.imported").count() == 1

    # every evaluation spec carries the document; the run exports as a TraceSet
    from loop.services.candidates import evaluation_spec

    run, cand, timed = _run_with_evaluation(imported, alice)
    assert evaluation_spec(cand)["target_document"] == imported.document
    call_command("export_traceset", "--run", str(run.pk), "--out", str(tmp_path / "ts"))
    ts = TraceSet.from_path(str(tmp_path / "ts"))
    assert [s.name for s in ts.solutions[DEF]] == [f"ark_{DEF}_r{run.pk}_c1"]
    assert len(ts.traces[DEF]) == timed > 0
    assert len(ts.workloads[DEF]) == 3

    # a promotion writes the TraceSet apply serves: every batch size its route covers, nothing past it
    from loop.models import ServingConfig
    from loop.services.deployments import serving_export
    from loop.services.fib import promotion_dir

    settings.SERVING_EXPORT_DIR = tmp_path / "serving"
    source = "def forward(hidden_states, residual, weight):\n    return hidden_states, residual\n"
    kernel = {"candidate_id": "c1", "params": {}, "source": source,
              "source_hash": "sha256:" + hashlib.sha256(source.encode()).hexdigest()}
    doc = {"schema": "ark.serving/1", "target": DEF, "hardware": "h200", "version": 1, "axes": ["batch_size"],
           "fallback": "default", "routes": [{"bounds": {"batch_size": [1, 65]}, "kernel": kernel}]}
    config = ServingConfig.objects.create(target=imported, hardware="h200", version=1, axis="batch_size",
                                          routes=doc["routes"], document=doc, author=alice, approver=dana)
    serving_export(config=config)
    ts = TraceSet.from_path(str(promotion_dir(config)))
    assert sorted(t.workload.axes["batch_size"] for t in ts.traces[DEF]) == list(range(1, 65))  # 2048: default


def test_generators_and_a_check_that_cannot_fit_are_refused_before_any_child_runs(db, alice, monkeypatch):
    from django.core.exceptions import ValidationError

    from loop.services import fib

    monkeypatch.setattr(fib, "fib_call", lambda *a, **k: pytest.fail("a child process was started"))
    text = DEF_PATH.read_text()
    with pytest.raises(ValidationError, match="not a built-in target"):
        fib.fib_definition_import(actor=alice, definition_text=text, ranges=["batch_size=1:9"], check="nope")
    with pytest.raises(ValidationError, match="lengths fill a 1-D integer tensor"):
        fib.fib_definition_import(actor=alice, definition_text=text, ranges=["batch_size=1:9"],
                                  inputs={"residual": {"kind": "lengths", "max": "batch_size"}})


def test_the_cli_imports_the_paged_indexer_with_its_declared_inputs(db, alice, tmp_path):
    """`--inputs` carries the generators (and the built-in check) a Definition cannot describe; without them
    the Definition's own reference fails on its drawn inputs and the import is refused (docs/interop.md)."""
    from loop.models import Target

    name = "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"
    path = ROOT / "gpu_worker" / "fib" / "definitions" / f"{name}.json"
    ranges = ["--range", "batch_size=2:3", "--range", "num_pages=40:96", "--range", "max_num_pages=34:40"]
    with pytest.raises(CommandError, match="own reference does not pass the declared check on ark's inputs"):
        call_command("import_definition", str(path), *ranges, "--check", "dsa_indexer_topk_fp8", "--user", "alice")
    not_json = tmp_path / "inputs.json"
    not_json.write_text("{inputs")
    with pytest.raises(CommandError, match="not JSON"):
        call_command("import_definition", str(path), *ranges, "--inputs", str(not_json), "--user", "alice")
    assert not Target.objects.filter(name=name).exists()
    call_command("import_definition", str(path), *ranges, "--inputs", str(path.with_suffix(".inputs.json")),
                 "--user", "alice")
    document = Target.objects.get(name=name).document
    assert document["check"] == "dsa_indexer_topk_fp8"
    assert {"seq_lens", "block_table", "k_index_cache_fp8"} <= set(document["inputs"])
