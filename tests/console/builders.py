"""Test data built through the real services (a thesis, a run, candidates taken through dispatch,
progress and a report), so pages are tested on the states the loop really produces."""

from django.db import transaction

from loop.models import Candidate, Run, Target

SOURCE = '''import triton
import triton.language as tl

PARAMS = {"BLOCK": 1024}


@triton.jit
def _kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def forward(x):
    return x
'''


def source_variant(tag: str, body: str = "") -> str:
    return SOURCE.replace("def forward(x):", f"# variant {tag}\n{body}def forward(x):")


def make_target(name: str = "dsa_topk") -> Target:
    target, _ = Target.objects.get_or_create(name=name, defaults={
        "axes": {"rows": [1, 128], "n_ctx": [4096, 262144]}, "dsls": ["triton"], "description": "top-k"})
    return target


def make_thesis(owner, *, target=None, title="Reduce top-k incrementally", body="Keep a running top-k.", **kwargs):
    from loop.services.theses import thesis_create

    return thesis_create(actor=owner, title=title, body=body, target=target or make_target(),
                         hardware=kwargs.pop("hardware", "h200"), **kwargs)


def make_run(owner, *, thesis=None, review_mode=Run.ReviewMode.GATE, hardware="h200", budget_candidates=20) -> Run:
    from loop.services.runs import run_start

    thesis = thesis or make_thesis(owner, hardware=hardware)
    return run_start(actor=owner, thesis=thesis, proposer=Run.Proposer.SWEEP, hardware=hardware,
                     review_mode=review_mode, budget_candidates=budget_candidates)


def submit(run: Run, *, source: str | None = None, tag: str = "a", parent=None, author=None) -> Candidate:
    from loop.services.candidates import candidate_submit

    return candidate_submit(run=run, source=source or source_variant(tag), proposer="sweep", parent=parent,
                            author=author, params={"BLOCK": 1024})


def dispatch(candidate: Candidate) -> Candidate:
    from loop.services.candidates import candidate_dispatch

    with transaction.atomic():
        Run.objects.select_for_update().get(pk=candidate.run_id)
        candidate_dispatch(candidate=candidate)
    candidate.refresh_from_db()
    return candidate


def progress(candidate: Candidate, stage: str, status: str = "started") -> Candidate:
    from loop.services.candidates import candidate_record_progress

    candidate_record_progress(candidate_id=candidate.pk, attempt=candidate.attempt, worker="gpu-test",
                              stage=stage, status=status, detail={})
    candidate.refresh_from_db()
    return candidate


def report(candidate: Candidate, report_json: dict) -> Candidate:
    from loop.services.evaluations import candidate_record_report

    candidate_record_report(candidate_id=candidate.pk, attempt=candidate.attempt, worker="gpu-test",
                            report=report_json)
    candidate.refresh_from_db()
    return candidate


def evaluated(run: Run, report_json: dict, **kwargs) -> Candidate:
    candidate = dispatch(submit(run, **kwargs))
    progress(candidate, "benchmark")
    return report(candidate, report_json)


N_CTX = (4096, 16384, 65536, 131072, 262144)


def passing_report(*, speedup: float = 1.25, crossover_at: int | None = 131072, findings=None) -> dict:
    """A GPU report of a candidate faster than the incumbent and the default below `crossover_at`."""
    shapes = []
    for n in N_CTX:
        default_us = 20.0 + n / 2000
        ratio = 1 / speedup if crossover_at is None or n < crossover_at else 1.1
        shapes.append({
            "shape": {"rows": 64, "n_ctx": n, "k": 2048}, "ratio": ratio, "ratio_ci95": [ratio * 0.97, ratio * 1.02],
            "aa_ratio": 1.0, "aa_ci95": [0.995, 1.005], "candidate": {"median_us": default_us * ratio}, "incumbent": {"median_us": default_us},
            "default": {"median_us": default_us * 1.1},
            "default_median_us": default_us * 1.1, "floor_us": n * 64 * 4 / 4.25e6,
        })
    ratios = [s["ratio"] for s in shapes]
    geo = 1.0
    for r in ratios:
        geo *= r
    geo = geo ** (1 / len(ratios))
    return {
        "schema": "ark.report/1", "hardware": {"kind": "h200", "gpu": "NVIDIA H200"},
        "stages": {
            "guard": {"status": "pass", "findings": findings or []},
            "verify": {"status": "pass", "shapes": [{"shape": {"n_ctx": n, "rows": 64}, "pass": True, "max_error": 0.0} for n in N_CTX]},
            "benchmark": {"status": "pass", "shapes": shapes},
            "e2e": {"status": "pass", "points": [
                {"batch": b, "context": c, "ratio": 1.03, "ratio_ci95": [1.01, 1.05], "aa_ci95": [0.995, 1.005],
                 "incumbent_tok_s": 1000.0 * b, "default_tok_s": 1000.0 * b, "candidate_tok_s": 1030.0 * b,
                 "parity": {"ok": True}, "kernel_ran": True}
                for b in (1, 8) for c in (4096, 65536)]},
        },
        "summary": {"geomean_speedup": 1 / geo, "geomean_ci95": [1 / (geo * 1.02), 1 / (geo * 0.97)]},
    }


def guard_report(*, code: str = "side_stream", line: int = 7) -> dict:
    return {"schema": "ark.report/1", "stages": {
        "guard": {"status": "fail", "findings": [{"code": code, "message": "creates a CUDA stream", "line": line}]}}}


def cpu_report() -> dict:
    return {"schema": "ark.report/1", "hardware": {"kind": "cpu"}, "stages": {
        "guard": {"status": "pass", "findings": []}, "verify": {"status": "pass", "shapes": []},
        "benchmark": {"status": "unavailable"}, "e2e": {"status": "unavailable"}}}
