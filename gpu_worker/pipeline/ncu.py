"""Hardware counters for a benchmarked candidate, from Nsight Compute where the host has it (docs/benchmark.md,
"Counters from Nsight Compute").

After a passing benchmark on a GPU, the evaluation runs one more sandboxed child under `ncu`: it makes inputs
for one shape (the listed benchmark shape with the most bytes to move), calls the candidate once to compile and
warm up, then once between cudaProfilerStart and cudaProfilerStop, the only range `ncu --profile-from-start off`
profiles. `ncu` writes one CSV row per kernel launch (`--page raw`); the parent sums them per kernel name.
Counters are context for people and the proposer, never scored: the candidate runs in the profiled process and
could start or stop the range, or write the file, itself.

`ncu` runs as the user the child runs as (`nobody` where the worker can drop to it): it shares the child's
scratch dir, HOME and TMPDIR, where the candidate can leave links, so it must not be root there. Its output
goes to a directory of its own and is read without following links, only as a regular file of that user and
of bounded size (`read_output`). Reading another user's counters needs root or the driver's
RmProfilingAdminOnly at 0 (it was 0 on the lent H100 host, 2026-12-07).
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import stat
import sys
from pathlib import Path

from .protocol import derive_seed

# ncu's metric name -> the report's key. Time and bytes are summed over a kernel's launches; percentages are
# averaged weighted by time; registers, grid and block are the first launch's.
METRICS = {
    "gpu__time_duration.sum": "time_ns",
    "dram__bytes_read.sum": "dram_read_bytes",
    "dram__bytes_write.sum": "dram_write_bytes",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy_pct",
    "lts__t_sector_hit_rate.pct": "l2_hit_pct",
    "launch__registers_per_thread": "registers",
}
PERCENTS = ("dram_pct", "sm_pct", "occupancy_pct", "l2_hit_pct")
TIMEOUT_S = 240.0
MAX_OUTPUT_BYTES = 4 << 20
TOP_KERNELS = 8


def find() -> str | None:
    """The ncu binary: ARK_NCU (a path, or 0 for none), else ncu on PATH, else CUDA's default place."""
    forced = os.environ.get("ARK_NCU")
    if forced == "0":
        return None
    for path in (forced, shutil.which("ncu"), "/usr/local/cuda/bin/ncu"):
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def argv(ncu: str, csv_path: Path, uid: int | None = None) -> list[str]:
    """The command that goes before the child's own: as `uid` (when given; the sandbox starts it as the worker's
    user), profile only the cudaProfilerStart/Stop range, at the GPU's own clocks (the harness never changes
    them), every metric of METRICS, raw CSV to `csv_path`."""
    command = [ncu, "--profile-from-start", "off", "--clock-control", "none", "--csv", "--page", "raw",
               "--metrics", ",".join(METRICS), "--log-file", str(csv_path)]
    if uid is None:
        return command
    drop = "import os, sys; os.setgroups([]); os.setgid(int(sys.argv[1])); os.setuid(int(sys.argv[1])); " \
           "os.execv(sys.argv[2], sys.argv[2:])"
    return [sys.executable, "-s", "-B", "-c", drop, str(uid), *command]


def output_dir(root: Path, uid: int | None) -> Path:
    """A directory for ncu's output that only its user (and root) can enter."""
    out = root / "ncu-out"
    out.mkdir(mode=0o700)
    if uid is not None:
        os.chown(out, uid, uid)
    return out


def read_output(path: Path, uid: int | None, limit: int = MAX_OUTPUT_BYTES) -> str:
    """ncu's CSV, read only if it is a regular file (no link followed) owned by `uid` (this process's own when
    None), at most `limit` bytes; "" otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != (os.geteuid() if uid is None else uid):
            return ""
        return os.read(fd, limit).decode("utf-8", "replace")
    finally:
        os.close(fd)


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except (AttributeError, ValueError):
        return None


def parse(text: str) -> list[dict]:
    """One dict per profiled launch from ncu's raw CSV page (its own lines before the header are skipped; the
    row after the header gives units)."""
    start = text.find('"ID"')
    if start < 0:
        return []
    rows = list(csv.DictReader(io.StringIO(text[start:])))
    launches = []
    for row in rows:
        if not row.get("ID") or not row["ID"].strip().isdigit():
            continue   # the units row
        launch = {"name": (row.get("Kernel Name") or "?")[:200], "grid": row.get("Grid Size"), "block": row.get("Block Size")}
        launch.update({key: _number(row.get(metric, "")) for metric, key in METRICS.items()})
        launches.append(launch)
    return launches


def summarize(launches: list[dict], top: int = TOP_KERNELS) -> list[dict]:
    """Per kernel name, largest total time first: launches, time, DRAM bytes and achieved rate, and the
    time-weighted percentages."""
    by_name: dict[str, list[dict]] = {}
    for launch in launches:
        by_name.setdefault(launch["name"], []).append(launch)
    kernels = []
    for name, group in by_name.items():
        ns = sum(g["time_ns"] or 0.0 for g in group)
        dram = sum((g["dram_read_bytes"] or 0.0) + (g["dram_write_bytes"] or 0.0) for g in group)
        row = {"name": name, "launches": len(group), "us": ns / 1000.0, "dram_bytes": dram,
               "dram_gb_per_s": dram / ns if ns else None, "registers": group[0]["registers"],
               "grid": group[0]["grid"], "block": group[0]["block"]}
        for key in PERCENTS:
            weighted = [(g[key], g["time_ns"] or 0.0) for g in group if g[key] is not None]
            weight = sum(w for _, w in weighted)
            row[key] = sum(v * w for v, w in weighted) / weight if weight else None
        kernels.append(row)
    kernels.sort(key=lambda r: -r["us"])
    return kernels[:top]


def shape_for(target, shapes: list[dict]) -> int:
    """The index of the listed shape with the most bytes to move (the first of equals)."""
    sizes = [target.bytes_min(s) for s in shapes]
    return sizes.index(max(sizes))


def profiled_call(cfg: dict, out, target, forward, seed: int) -> None:
    """The child's side: inputs for the one shape from the secret, a warm call, then one call inside the range
    ncu profiles."""
    import torch  # local: only a GPU child profiles

    shape = cfg["shapes"][0]
    inputs = target.make_inputs(shape, derive_seed(seed, "ncu"), "cuda")
    forward(*inputs)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    try:
        forward(*inputs)
        torch.cuda.synchronize()
    finally:
        torch.cuda.profiler.stop()
    out.send(type="ncu_call", shape=shape)
