"""Nsight Compute's counters (pipeline/ncu.py): ncu's raw CSV read as ncu wrote it on an H100, summed per kernel,
and the evaluation's step that runs the sandboxed child under ncu and puts the counters in one shape's profile."""

import importlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from gpu_worker.contract import BenchmarkStage
from gpu_worker.pipeline import ncu
from gpu_worker.pipeline.sandbox import ChildRun

evaluate = importlib.import_module("gpu_worker.pipeline.evaluate")   # the package's `evaluate` is the function

# ncu 2025.3.1's --csv --page raw output for dsa_topk's best at 4 x 131072 (one call, nine launches), on an H100
# (2026-12-07), trimmed to the columns ark reads; its own ==PROF== lines come first, as in a --log-file.
RAW = (Path(__file__).parent / "data" / "ncu_raw_h100.csv").read_text()


def test_the_raw_page_gives_one_row_per_launch_with_numbers_not_text():
    launches = ncu.parse(RAW)
    assert [x["name"] for x in launches] == ["_kd_place", "_kc_select", "_r_hist", "_r_hist", "_r_hist", "_r_hist",
                                             "_r_place", "_ka_sample", "_kb_filter"]
    first = launches[0]
    assert first["time_ns"] == 6816.0 and first["dram_read_bytes"] == 1114880.0     # "6,816", "1,114,880"
    assert first["registers"] == 71.0 and first["grid"] == "(4, 64, 1)" and first["block"] == "(128, 1, 1)"
    assert ncu.parse("==PROF== No kernels were profiled.\n") == []


def test_launches_sum_per_kernel_with_time_weighted_percentages():
    kernels = {k["name"]: k for k in ncu.summarize(ncu.parse(RAW), top=20)}
    hist = kernels["_r_hist"]
    assert hist["launches"] == 4 and hist["us"] == pytest.approx((3200 + 3296 + 3136 + 3360) / 1000)
    weighted = (0.31 * 3200 + 0.29 * 3296 + 0.35 * 3136 + 0.33 * 3360) / (3200 + 3296 + 3136 + 3360)
    assert hist["dram_pct"] == pytest.approx(weighted)
    assert hist["dram_bytes"] == 32768 + 32000 + 36096 + 36864
    assert hist["dram_gb_per_s"] == pytest.approx(hist["dram_bytes"] / (hist["us"] * 1000))   # bytes per ns
    order = [k["name"] for k in ncu.summarize(ncu.parse(RAW))]
    assert order[0] == "_r_hist" and order[1] == "_kb_filter"    # 13.0 us over four launches, then 8.9 us


def test_the_tool_is_found_only_where_it_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("ARK_NCU", "0")
    assert ncu.find() is None
    fake = tmp_path / "ncu"
    fake.write_text("#!/bin/sh\n")
    monkeypatch.setenv("ARK_NCU", str(fake))
    assert ncu.find() is None            # not executable
    fake.chmod(0o755)
    assert ncu.find() == str(fake)
    argv = ncu.argv(str(fake), tmp_path / "x.csv")
    assert argv[:3] == [str(fake), "--profile-from-start", "off"] and "--clock-control" in argv
    assert argv[argv.index("--clock-control") + 1] == "none"     # the harness never changes the GPU's clocks
    assert argv[argv.index("--metrics") + 1].split(",") == list(ncu.METRICS)
    # where the child drops to nobody, ncu runs as nobody too: it shares the child's HOME and TMPDIR
    dropped = ncu.argv(str(fake), tmp_path / "x.csv", uid=65534)
    assert dropped[dropped.index("-c") + 2:] == ["65534", *argv]


def test_ncu_output_is_read_only_as_a_regular_file_of_its_user(tmp_path):
    out = ncu.output_dir(tmp_path, None)
    assert (out.stat().st_mode & 0o777) == 0o700
    (out / "ncu.csv").write_text(RAW)
    assert ncu.read_output(out / "ncu.csv", None) == RAW
    assert ncu.read_output(out / "ncu.csv", None, limit=10) == RAW[:10]
    secret = tmp_path / "secret"
    secret.write_text("root's own file")
    (out / "link.csv").symlink_to(secret)                      # a link the candidate left: not followed
    assert ncu.read_output(out / "link.csv", None) == ""
    assert ncu.read_output(out / "ncu.csv", os.geteuid() + 1) == ""   # a file of another user: not read
    (out / "dir.csv").mkdir()
    assert ncu.read_output(out / "dir.csv", None) == "" and ncu.read_output(out / "missing.csv", None) == ""


def _evaluation_after_a_passing_benchmark(tmp_path):
    source = (Path(evaluate.__file__).parents[1] / "candidates" / "dsa_topk" / "seed.py").read_text()
    ev = evaluate.Evaluation({"candidate_id": "n", "target": "dsa_topk", "source": source, "profile": "full"})
    ev.target = ev.load_target()
    ev.info = {"dsl": "triton", "kernels": []}
    ev.scratch_root = tmp_path
    shapes = ev.target.benchmark_shapes(ev.profile)   # a CPU host's evaluation runs the smoke profile
    ev.report.stages.benchmark = BenchmarkStage.from_dict(
        {"status": "pass", "shapes": [{"shape": s, "profile": {"kernel_us": 1.0}} for s in shapes]}, "benchmark")
    return ev, shapes


def test_the_evaluation_profiles_the_largest_shape_under_ncu_and_keeps_the_counters_there(tmp_path, monkeypatch):
    ev, shapes = _evaluation_after_a_passing_benchmark(tmp_path)
    monkeypatch.setenv("ARK_NCU", "/bin/true")
    calls = []

    def fake_run_child(cfg, *, wrap, scratch, **kwargs):
        calls.append((cfg, wrap, scratch))
        log = Path(wrap[wrap.index("--log-file") + 1])
        assert log.parent == tmp_path / "ncu-out" and not log.is_relative_to(scratch)   # ncu's own directory
        log.write_text(RAW)
        return ChildRun(messages=[{"type": "done"}], returncode=0, wall_s=3.0)

    monkeypatch.setattr(evaluate, "run_child", fake_run_child)
    ev.counters()
    ((cfg, wrap, _),) = calls
    assert cfg["mode"] == "ncu" and wrap[0] == "/bin/true"
    largest = max(shapes, key=lambda s: s["rows"] * s["n_ctx"])
    assert len(shapes) > 1 and cfg["shapes"] == [largest]
    entries = {(e.shape["rows"], e.shape["n_ctx"]): e for e in ev.report.stages.benchmark.shapes}
    got = entries[(largest["rows"], largest["n_ctx"])].profile
    assert got["kernel_us"] == 1.0 and got["ncu"]["kernels"][0]["name"] == "_r_hist"   # beside the torch profile
    assert sum("ncu" in e.profile for e in entries.values()) == 1


def test_no_counters_without_the_tool_or_a_passing_benchmark_and_an_empty_run_says_why(tmp_path, monkeypatch):
    ev, _ = _evaluation_after_a_passing_benchmark(tmp_path)
    monkeypatch.setattr(evaluate, "run_child", lambda *a, **k: pytest.fail("no ncu: no child"))
    monkeypatch.setenv("ARK_NCU", "0")
    ev.counters()
    ev.report.stages.benchmark.status = "fail"
    monkeypatch.setenv("ARK_NCU", "/bin/true")
    ev.counters()
    assert all("ncu" not in e.profile for e in ev.report.stages.benchmark.shapes)
    ev.report.stages.benchmark.status = "pass"
    monkeypatch.setattr(evaluate, "run_child", lambda *a, **k: ChildRun(returncode=1, log_tail="ERR_NVGPUCTRPERM"))
    ev.counters()
    (found,) = [e.profile["ncu"] for e in ev.report.stages.benchmark.shapes if "ncu" in e.profile]
    assert found["kernels"] == [] and "ERR_NVGPUCTRPERM" in found["error"]


def test_the_cli_summary_prints_the_counters_line(tmp_path, monkeypatch):
    from gpu_worker import cli

    ev, _ = _evaluation_after_a_passing_benchmark(tmp_path)
    monkeypatch.setenv("ARK_NCU", "/bin/true")

    def fake_run_child(cfg, *, wrap, **kwargs):
        Path(wrap[wrap.index("--log-file") + 1]).write_text(RAW)
        return ChildRun(returncode=0)

    monkeypatch.setattr(evaluate, "run_child", fake_run_child)
    ev.counters()
    (line,) = [x for x in cli._summary_lines(ev.report) if "ncu at" in x]
    assert line.startswith('    ncu at {"rows": 64, "n_ctx": 131072}: _r_hist x4 13.0 us, DRAM 0% of peak, SM 1%')


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="dropping to nobody needs root")
def test_the_wrapper_runs_ncu_as_the_childs_user_not_root():
    """The wrapper's own drop, run for real: a stand-in for ncu writes the uid, gid and groups it runs with to
    its --log-file, as ncu would write its CSV there."""
    base = Path(tempfile.mkdtemp(prefix="ark-ncu-test-"))
    try:
        base.chmod(0o755)
        fake = base / "ncu"
        fake.write_text("#!/bin/sh\nwhile [ \"$1\" != --log-file ]; do shift; done\n"
                        "echo \"$(id -u) $(id -g) $(id -G)\" > \"$2\"\n")
        fake.chmod(0o755)
        out = ncu.output_dir(base, 65534)
        csv_path = out / "ncu.csv"
        subprocess.run(ncu.argv(str(fake), csv_path, uid=65534), check=True, timeout=60)
        assert ncu.read_output(csv_path, 65534).split() == ["65534", "65534", "65534"]
        assert ncu.read_output(csv_path, None) == ""      # not root's file: the parent's own read refuses it
    finally:
        shutil.rmtree(base, ignore_errors=True)
