"""Verification runs the candidate every way referee.RUNS lists, and the referee judges every run.

The child's verify loop runs here in-process on the CPU (Triton's interpreter), on small shapes, so each
test shows one run catching the behaviour it is there for; the sandboxed end-to-end path is covered
by tests/redteam (verify_* candidates)."""

import contextlib
import shutil
import threading
import time
from pathlib import Path

import pytest
import torch

from gpu_worker.pipeline import child_run, cpu_stand_in, referee, tamper, verify_child
from gpu_worker.pipeline.guard import check_candidate
from gpu_worker.targets import get_target
from tests.redteam.catalog import source as redteam_source

TOPK = get_target("dsa_topk")
HONEST = redteam_source("honest_topk_bisect")
SEED = 20261204
SHAPES = [{"rows": 2, "n_ctx": 6000, "k": 2048, "values": "normal", "lengths": "ragged"},
          {"rows": 3, "n_ctx": 5000, "k": 2048, "values": "near_bf16", "lengths": "full"}]


@contextlib.contextmanager
def _launch_log_installed():
    """LaunchLog patches the run method of Triton's function classes: put them back afterwards."""
    from triton.runtime import interpreter, jit
    saved = [(cls, cls.run) for cls in (jit.JITFunction, interpreter.InterpretedFunction)]
    log = child_run.LaunchLog()
    log.install(cute=False)
    try:
        yield log
    finally:
        for cls, run in saved:
            cls.run = run


@pytest.fixture
def launch_log():
    with _launch_log_installed() as log:
        yield log


def _verify(tmp_path, launch_log, source: str, shapes=SHAPES, seed=SEED, guarded=True):
    """Run the child's verify on `source`, then judge each shape as the parent does. guarded=False
    shows what the run-time evidence catches on its own, where the static guard would stop it first."""
    path = tmp_path / "candidate.py"
    path.write_text(source)
    findings, info = check_candidate(source, TOPK)
    assert not findings or not guarded, findings
    module = child_run.load_module(str(path), f"cand_{abs(hash(source))}")
    cand = child_run.Candidate(module.forward, info["kernels"], "triton", "cpu", launch_log, threading.active_count)
    out = cpu_stand_in.Messages()
    outdir = tmp_path / "outputs"
    outdir.mkdir()
    verify_child.verify({"shapes": shapes, "outputs_dir": str(outdir)}, out, TOPK, cand, seed, time.perf_counter)
    verdicts = []
    for m in out.messages:
        i = m["index"]
        codes = [f["code"] for f in m["findings"]]
        if m.get("files"):
            v = referee.judge(TOPK, shapes[i], i, seed, outdir, m["files"], "cpu")
            codes += [f["code"] for f in v["findings"]]
            verdicts.append((m, v, codes))
        else:
            verdicts.append((m, None, codes))
    return verdicts


@pytest.fixture(scope="module")
def _honest_second_shape(tmp_path_factory):
    """The honest candidate verified once on SHAPES[1:], for the tests that then change its saved outputs."""
    base = tmp_path_factory.mktemp("honest")
    with _launch_log_installed() as log:
        return base, _verify(base, log, HONEST, shapes=SHAPES[1:])


@pytest.fixture
def honest_outputs(_honest_second_shape, tmp_path):
    """That verification's verdicts, its outputs copied to this test's tmp_path/outputs to change at will."""
    base, verdicts = _honest_second_shape
    shutil.copytree(base / "outputs", tmp_path / "outputs")
    return verdicts


def _codes(verdicts) -> set:
    return {c for _, _, codes in verdicts for c in codes}


def test_an_honest_candidate_passes_every_run_and_saves_what_the_plan_lists(tmp_path, launch_log):
    verdicts = _verify(tmp_path, launch_log, HONEST)
    assert len(verdicts) == len(SHAPES)
    for i, (m, v, codes) in enumerate(verdicts):
        assert not codes, codes
        assert v["pass"], v
        assert m["files"] == [referee.file_name(i, r.tag) for r in referee.runs_for(i, "cpu")]
    assert "later" in {r.tag for r in referee.runs_for(0, "cpu")}
    assert "later" not in {r.tag for r in referee.runs_for(1, "cpu")}
    assert {r.tag for r in referee.runs_for(1, "cuda")} >= {"stream", "replay", "replay_fresh"}


def test_a_candidate_wrong_for_new_pointers_fails_the_moved_run(tmp_path, launch_log):
    verdicts = _verify(tmp_path, launch_log, redteam_source("verify_topk_new_pointer"))
    for _, v, codes in verdicts:
        assert "verify:new_buffers" in codes
        assert v["findings"][0]["message"].startswith("right on the first call, wrong on the same values")
    assert set(verdicts[1][2]) <= {"verify:new_buffers", "verify:nondeterministic"}


def test_a_candidate_that_memoises_after_three_calls_fails_the_later_run(tmp_path, launch_log):
    verdicts = _verify(tmp_path, launch_log, redteam_source("verify_topk_nth_call"))
    assert "verify:call_count" in verdicts[0][2]
    assert not verdicts[1][2]  # three calls on the second shape: the memo is never served there


FALLBACK_ON_THIRD_CALL = HONEST.replace('''def forward(logits, lengths, k):
''', '''_calls = []


def forward(logits, lengths, k):
    _calls.append(1)
    if len(_calls) == 3:  # the refresh run of the first shape: torch does the work
        return torch.ops.aten.topk(logits, k, 1)[1].to(torch.int32)
''')


def test_every_call_is_held_to_the_evidence_not_only_the_first(tmp_path, launch_log):
    assert "_calls.append" in FALLBACK_ON_THIRD_CALL
    verdicts = _verify(tmp_path, launch_log, FALLBACK_ON_THIRD_CALL, shapes=SHAPES[:1], guarded=False)
    assert "verify:torch_fallback" in verdicts[0][2]


def test_the_referee_judges_the_plan_not_the_files_the_child_lists(tmp_path, honest_outputs):
    verdicts = honest_outputs
    outdir = tmp_path / "outputs"
    good = referee.judge(TOPK, SHAPES[1], 0, SEED, outdir, ["verify_0_first.pt"], "cpu")
    assert good["pass"]  # the plan's files are there: the child's short list does not matter
    (outdir / referee.file_name(0, "refresh")).unlink()
    v = referee.judge(TOPK, SHAPES[1], 0, SEED, outdir, verdicts[0][0]["files"], "cpu")
    assert not v["pass"] and v["findings"][0]["code"] == "verify:missing_output"


def test_a_wrong_refresh_output_gets_the_stale_finding(tmp_path, honest_outputs):
    verdicts = honest_outputs
    outdir = tmp_path / "outputs"
    first = torch.load(outdir / referee.file_name(0, "first"), weights_only=True)
    torch.save(first, outdir / referee.file_name(0, "refresh"))  # the first answer again: stale
    v = referee.judge(TOPK, SHAPES[1], 0, SEED, outdir, verdicts[0][0]["files"], "cpu")
    assert [f["code"] for f in v["findings"]] == ["verify:stale_result"]


def test_the_burst_length_comes_from_the_secret():
    lengths = {verify_child.burst_length(s) for s in range(200)}
    assert lengths == set(range(4, 17))


def test_a_wrong_answer_that_is_not_stale_is_plain_wrong(tmp_path, honest_outputs):
    """Right on the first call's values and wrong on other values is a value-dependent bug, not a
    stale result: the run's own code is kept for answers that repeat an earlier one."""
    verdicts = honest_outputs
    outdir = tmp_path / "outputs"
    path = outdir / referee.file_name(0, "refresh")
    out = torch.load(path, weights_only=True)
    logits, lengths, k = TOPK.make_inputs(SHAPES[1], referee.derive_seed(SEED, "verify", 0, 1), "cpu")
    chosen = set(out[0][0].tolist())
    worst = int(logits[0].argmin())
    assert worst not in chosen
    out[0][0, 0] = worst  # one selected index swapped for the row's smallest value
    torch.save(out, path)
    v = referee.judge(TOPK, SHAPES[1], 0, SEED, outdir, verdicts[0][0]["files"], "cpu")
    assert [f["code"] for f in v["findings"]] == ["verify:wrong"]
    assert "new values written into the first call's input tensors" in v["findings"][0]["message"]


def test_every_module_of_the_child_is_watched_for_tampering():
    """A candidate that patched a function of the verify loop (say evidence_findings) would pass unseen
    unless tamper.check() compares that module's names (pipeline/tamper.py, HARNESS_MODULES)."""
    names = [p.stem for p in Path(child_run.__file__).parent.glob("*.py")]
    child_modules = [n for n in names if n in ("child", "child_run") or n.endswith("_child")]
    assert {"child", "child_run", "verify_child", "bench_child", "retime_child"} <= set(child_modules)
    for name in child_modules:
        assert f"gpu_worker.pipeline.{name}" in tamper.HARNESS_MODULES, name
