"""Fold dsa_topk's top-k into the indexers' best.py: a candidate is one file, so each holds a copy.

python gpu_worker/candidates/fold_topk.py            # rewrite the folded region from its source
python gpu_worker/candidates/fold_topk.py --check    # exit 1 if it has drifted (tests run this)

Source: dsa_topk/best.py (the dsa_topk best, one top-k for every target). Its kernels (its first
@triton.jit up to `def forward(`) go between the FOLD markers of dsa_indexer_topk/best.py, and its PARAMS,
prefixed TK_, become the one line of TK_ entries in that file's PARAMS. Everything else in best.py is its own.

The BEGIN marker records a digest of the region it wrote. A hand edit inside the region changes the digest:
--check then fails, and a plain run refuses to overwrite it (--force does), so an edit is never lost silently.
"""
import ast
import hashlib
import pathlib
import re
import sys

HERE = pathlib.Path(__file__).resolve().parent
SOURCE = HERE / "dsa_topk" / "best.py"
TARGET = HERE / "dsa_indexer_topk" / "best.py"
# other candidates that hold the same folded copy: the script (not main()) checks and refolds them too
ALSO = (HERE / "dsa_indexer_topk_fp8" / "best.py",)
BEGIN = re.compile(r"# FOLD BEGIN[^\n]*digest (?P<digest>[0-9a-f]{16})\n")
END = "# FOLD END\n"


def _params(text: str) -> dict:
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "PARAMS":
            return ast.literal_eval(node.value)
    raise ValueError("no PARAMS")


def _digest(region: str) -> str:
    return hashlib.sha256(region.encode()).hexdigest()[:16]


def _split(text: str) -> tuple[str, str, str, str]:
    """(head, recorded digest, region, tail) of the target file."""
    m = BEGIN.search(text)
    if m is None or END not in text[m.end():]:
        raise ValueError(f"{TARGET.name} lacks its FOLD markers")
    region, tail = text[m.end():].split(END, 1)
    return text[:m.start()], m["digest"], region, tail


def folded(current: str) -> str:
    """The target file as the fold writes it from SOURCE, keeping its own parts from `current`."""
    src = SOURCE.read_text()
    region = "\n\n" + src[src.index("@triton.jit"):src.index("def forward(")].rstrip() + "\n\n\n"
    head, _, _, tail = _split(current)
    tk = "          " + ", ".join(f'"TK_{n}": {v!r}' for n, v in _params(src).items()) + "}\n"
    lines = head.splitlines(keepends=True)
    at = [i for i, line in enumerate(lines) if line.startswith('          "TK_')]
    if len(at) != 1:
        raise ValueError("the indexer's PARAMS needs exactly one line of TK_ entries")
    lines[at[0]] = tk
    begin = (f"# FOLD BEGIN: written by gpu_worker/candidates/fold_topk.py from {SOURCE.parent.name}/{SOURCE.name}, "
             f"digest {_digest(region)}\n")
    return "".join(lines) + begin + region + END + tail


def hand_edited(current: str) -> bool:
    _, recorded, region, _ = _split(current)
    return _digest(region) != recorded


def main(argv: list[str]) -> int:
    current = TARGET.read_text()
    if hand_edited(current) and "--force" not in argv:
        print(f"{TARGET.parent.name}/{TARGET.name}: the folded region was edited by hand. Move the edit into "
              f"{SOURCE.parent.name}/{SOURCE.name} and run fold_topk.py --force (which overwrites the region).")
        return 1
    stale = folded(current) != current
    if "--check" in argv:
        if stale:
            print(f"{TARGET.parent.name}/{TARGET.name} differs from what fold_topk.py writes: run it")
        return 1 if stale else 0
    if stale:
        TARGET.write_text(folded(current))
        print(f"wrote {TARGET.parent.name}/{TARGET.name}")
    return 0


if __name__ == "__main__":
    rc = main(sys.argv[1:])
    for TARGET in ALSO:  # main() reads the module's TARGET
        rc = max(rc, main(sys.argv[1:]))
    sys.exit(rc)
