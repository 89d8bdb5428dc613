"""Submitting a candidate: syntax, size and DSL are checked before anything is queued."""

import pytest
from django.core.exceptions import PermissionDenied

from gpu_worker.queues import Task
from loop.models import Candidate, Event, OutboxMessage
from loop.proposers.human import candidate_submit_human
from loop.services.candidates import MAX_SOURCE_BYTES, CandidateRejected, candidate_submit, source_hash

GOOD = '''import torch
import triton
import triton.language as tl

PARAMS = {"BLOCK": 1024}


@triton.jit
def _kernel(x_ptr, BLOCK: tl.constexpr):
    pass


def forward(logits, lengths, k):
    return torch.empty((logits.shape[0], k), dtype=torch.int32)
'''


def rejected(run, source):
    outbox_before = OutboxMessage.objects.count()
    with pytest.raises(CandidateRejected) as info:
        candidate_submit(run=run, source=source, proposer="human")
    assert not Candidate.objects.filter(run=run).exists()
    assert OutboxMessage.objects.count() == outbox_before
    return " ".join(info.value.problems)


def test_it_records_a_good_source_as_proposed(make_run):
    run = make_run()
    candidate = candidate_submit(run=run, source=GOOD, proposer="human")
    assert (candidate.status, candidate.number, candidate.attempt) == ("proposed", 1, 0)
    assert candidate.source_hash == source_hash(GOOD)
    assert Event.objects.filter(type="candidate.proposed", subject_id=str(candidate.pk)).count() == 1


def test_the_source_hash_is_the_one_dispatch_computes():
    from gpu_worker.dispatch.loader import source_hash as dispatch_hash

    assert source_hash(GOOD) == dispatch_hash(GOOD)


def test_it_refuses_a_syntax_error_with_its_line(make_run):
    assert "syntax error at line 2" in rejected(make_run(), "x = 1\ndef forward(:\n")


def test_it_refuses_a_source_over_the_size_limit(make_run):
    assert "limit" in rejected(make_run(), GOOD + "#" * MAX_SOURCE_BYTES)


def test_it_refuses_a_kernel_not_written_in_the_targets_dsl(make_run):
    torch_only = "import torch\n\ndef forward(logits, lengths, k):\n    return torch.topk(logits, k).indices\n"
    assert "DSL" in rejected(make_run(), torch_only)


def test_it_refuses_a_source_without_forward(make_run):
    assert "forward" in rejected(make_run(), GOOD.replace("def forward", "def run"))


def test_it_refuses_params_that_are_not_a_literal(make_run):
    assert "PARAMS" in rejected(make_run(), GOOD.replace('{"BLOCK": 1024}', "dict(BLOCK=1024)"))


def test_it_refuses_the_same_source_twice_in_a_run(make_run):
    run = make_run()
    candidate_submit(run=run, source=GOOD, proposer="human")
    with pytest.raises(CandidateRejected, match="already candidate 1"):
        candidate_submit(run=run, source=GOOD, proposer="human")


def test_it_refuses_a_candidate_beyond_the_budget(make_run):
    run = make_run(budget_candidates=1)
    candidate_submit(run=run, source=GOOD, proposer="human")
    with pytest.raises(CandidateRejected, match="budget"):
        candidate_submit(run=run, source=GOOD + "\n# two\n", proposer="human")


def test_a_person_submits_as_reviewer_not_as_viewer(make_run, bob, charlie):
    run = make_run()
    candidate = candidate_submit_human(run=run, actor=bob, source=GOOD, note="try 1024")
    assert candidate.author == bob and candidate.proposer == "human"
    assert OutboxMessage.objects.filter(task=Task.LOOP_ADVANCE, args=[run.pk]).exists()
    with pytest.raises(PermissionDenied):
        candidate_submit_human(run=run, actor=charlie, source=GOOD + "\n")


def test_the_management_command_submits_a_file(make_run, bob, tmp_path):
    from django.core.management import CommandError, call_command

    run = make_run()
    path = tmp_path / "cand.py"
    path.write_text(GOOD)
    call_command("submit_candidate", str(path), run=run.pk, user="bob")
    assert run.candidates.get().author == bob
    path.write_text("def forward(:\n")
    with pytest.raises(CommandError, match="syntax error"):
        call_command("submit_candidate", str(path), run=run.pk, user="bob")
    path.write_text(GOOD + "\n# by the run's creator\n")
    call_command("submit_candidate", str(path), run=run.pk)
    assert run.candidates.get(number=2).author == run.created_by


def test_a_proposer_cannot_choose_the_route_set_its_e2e_gate_serves(make_run):
    """The e2e route set is a reviewer's (candidate_rebenchmark): a proposal naming one is stored without it,
    so the gate serves the candidate everywhere."""
    run = make_run()
    proposal = {"rationale": "faster", "e2e_routes": [{"bounds": {"rows": [1, 2]}, "kernel": "candidate"}],
                "measured_against": 99}
    candidate = candidate_submit(run=run, source=GOOD, proposer="agent", proposal=proposal)
    assert candidate.proposal == {"rationale": "faster"}
