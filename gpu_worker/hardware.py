"""What this worker runs on, read without initialising CUDA in the calling process."""

import os
import re
import shutil
import subprocess


def _nvidia_smi(query: str) -> list[str]:
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def kind_from_name(gpu_name: str) -> str:
    """'NVIDIA H200' -> 'h200'; 'NVIDIA GeForce RTX 5090' -> 'rtx5090'."""
    name = gpu_name.lower().replace("nvidia", "").replace("geforce", "")
    match = re.search(r"(rtx\s*\d{4}|[a-z]\d{2,4})", name)
    return match.group(1).replace(" ", "") if match else re.sub(r"\W+", "-", name).strip("-")


def fingerprint() -> dict:
    """GPU name, driver, memory and clocks of the first visible GPU, or {"kind": "cpu"}."""
    rows = _nvidia_smi("name,driver_version,memory.total,clocks.sm,clocks.mem,clocks_throttle_reasons.active")
    if not rows:
        return {"kind": "cpu", "gpu": None, "driver": None, "memory_mib": None}
    name, driver, memory, sm, mem, throttle = [f.strip() for f in (rows[0].split(",") + [""] * 6)[:6]]
    return {
        "kind": kind_from_name(name),
        "gpu": name,
        "driver": driver,
        "memory_mib": int(memory) if memory.isdigit() else None,
        "sm_clock_mhz": int(sm) if sm.isdigit() else None,
        "mem_clock_mhz": int(mem) if mem.isdigit() else None,
        "throttle_reasons": throttle or None,
        "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }
