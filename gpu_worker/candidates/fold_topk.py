"""Fold the dsa_topk kernels into the two best.py files: a candidate is one file, so they hold copies.

python gpu_worker/candidates/fold_topk.py            # rewrite both files from their sources
python gpu_worker/candidates/fold_topk.py --check    # exit 1 if either has drifted (tests run this)

Edit the source, then run this. dsa_topk/best.py is SRC (best_v21.py) under its own first docstring line.
dsa_indexer_topk/best.py keeps its own parts (docstring, logits kernel, forward) and takes INDEXER_SRC's kernels
(its first @triton.jit up to forward) between the FOLD markers, and INDEXER_SRC's PARAMS,
prefixed TK_, as the last line of its PARAMS. dsa_topk takes best_v21.py and the indexer
best_v22.py: value-linear digits, 2x faster on indexer logits whose k-th value lies near zero (~80 -> 40 us
at 64 x 128K) and ~1 us slower on the normal values of dsa_topk's benchmark (round 8 of NOTES.md).
"""
import ast
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
SRC = HERE / "dsa_topk" / "best_v21.py"
INDEXER_SRC = HERE / "dsa_topk" / "best_v22.py"
TOPK = HERE / "dsa_topk" / "best.py"
INDEXER = HERE / "dsa_indexer_topk" / "best.py"
BEGIN = f"# FOLD BEGIN: the top-k of dsa_topk/{INDEXER_SRC.name}, written by gpu_worker/candidates/fold_topk.py\n"
END = "# FOLD END\n"
TOPK_HEAD = '"""dsa_topk best: best_v21.py, copied by gpu_worker/candidates/fold_topk.py (edit best_v21.py, then run it).\n'


def _params(text):
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "PARAMS":
            return ast.literal_eval(node.value)
    raise ValueError("no PARAMS")


def folded():
    src = SRC.read_text()
    topk = TOPK_HEAD + src.split("\n", 1)[1]
    isrc = INDEXER_SRC.read_text()
    kernels = isrc[isrc.index("@triton.jit"):isrc.index("def forward(")].rstrip() + "\n"
    idx = INDEXER.read_text()
    head, rest = idx.split(BEGIN)
    _, tail = rest.split(END)
    params = _params(isrc)
    tk = "          " + ", ".join(f'"TK_{n}": {v!r}' for n, v in params.items()) + "}\n"
    lines = head.splitlines(keepends=True)
    at = [i for i, line in enumerate(lines) if line.startswith('          "TK_')]
    assert len(at) == 1, "the indexer's PARAMS needs exactly one line of TK_ entries"
    lines[at[0]] = tk
    return {TOPK: topk, INDEXER: "".join(lines) + BEGIN + "\n\n" + kernels + "\n\n" + END + tail}


def _rel(p):
    return str(p.relative_to(HERE)) if HERE in p.parents else str(p)


def main(argv):
    stale = [p for p, text in folded().items() if not p.exists() or p.read_text() != text]
    if "--check" in argv:
        for p in stale:
            print(f"{_rel(p)} differs from what fold_topk.py writes: edit its source and run it")
        return 1 if stale else 0
    for p, text in folded().items():
        p.write_text(text)
    print("wrote", ", ".join(_rel(p) for p in folded()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
