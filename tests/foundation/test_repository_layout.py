"""The house rules a reader can count (docs/conventions.md): experiments are records, not files in the package,
and bench/ holds the scripts that are run again and the latest record of each benchmark."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _tracked(folder: str) -> list[str]:
    out = subprocess.run(["git", "ls-files", folder], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if line]


def test_bench_keeps_under_sixty_files():
    files = _tracked("bench")
    assert files, "bench/ is tracked"
    assert len(files) < 60, f"{len(files)} files: retire superseded records to git history (bench/results/h200/INDEX.md)"


def test_no_numbered_kernel_variants_in_the_package():
    numbered = [f for f in _tracked("gpu_worker/candidates") if re.search(r"(_v\d+|\d+)\.py$", f)]
    assert numbered == [], f"a variant is an ark record or lives in git history, not a numbered file: {numbered}"
