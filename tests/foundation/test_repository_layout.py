"""The house rules a reader can count (docs/conventions.md): experiments are records, not files in the package,
and bench/ holds the scripts that are run again and the latest record of each benchmark."""

import re
import subprocess
import sys
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


def _anchors(text: str) -> list[str]:
    """What a citation's section name can point at in a docs/ file: its headings, its bold run-in labels, and the
    first words of each paragraph and table row (the kernel notes name their runs that way), lower-cased."""
    found = [m.group(1) for m in re.finditer(r"^#+\s+(.*)$", text, re.M)]
    found += [m.group(1) for m in re.finditer(r"\*\*(.+?)\*\*", text, re.S)]
    found += [m.group(1) for m in re.finditer(r"(?:\A|\n\s*\n)([^\n#|][^\n]*)", text)]
    found += [m.group(1) for m in re.finditer(r"^\|\s*([^|\n]+)", text, re.M)]
    return [re.sub(r"\s+", " ", a).strip().lower() for a in found]


def test_every_section_the_code_cites_is_in_docs():
    """A reason the code gives points at docs/<file>.md and a section by name; both must exist, so that a reader
    of the repository alone finds it (docs/conventions.md) and a renamed section cannot strand its citations."""
    anchors = {p.name: _anchors(p.read_text()) for p in (ROOT / "docs").glob("*.md")}
    cite = re.compile(r"docs/([\w-]+\.md)[,:]?\s*(?:section\s+)?\"([^\"]+)\"")
    missing, seen = [], 0
    for rel in _tracked("."):
        if not rel.endswith((".py", ".md", ".html", ".sh")):
            continue
        joined = re.sub(r"\s*\n\s*#?\s*", " ", (ROOT / rel).read_text(errors="replace"))  # wrapped comments
        for m in cite.finditer(joined):
            seen += 1
            doc, section = m.group(1), re.sub(r"\s+", " ", m.group(2)).strip().lower()
            if doc not in anchors:
                missing.append(f"{rel}: docs/{doc} does not exist")
            elif not any(section in a for a in anchors[doc]):
                missing.append(f'{rel}: docs/{doc} has no section "{m.group(2)}"')
    assert seen > 50, f"only {seen} citations found: the pattern no longer reads them"
    assert missing == [], "\n".join(missing)


def test_ruff_finds_no_unused_or_undefined_name():
    """pyproject.toml's lint rules (pyflakes and syntax errors) hold over the repository: an unused import or
    variable, a name used before it is bound, a redefinition."""
    run = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=ROOT, capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
