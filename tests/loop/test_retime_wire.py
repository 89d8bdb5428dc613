"""The re-timing over the real wire: the loop queues gpu.retime through the outbox and Redis, a real GPU-side
Celery worker (CPU mode, so it has nothing to time) answers on loop.retimed, a real loop worker records the
Confirmation, and the promotion of the GPU-timed candidate stays refused with the reason."""

import pytest

from loop.models import Candidate, Confirmation, Evaluation, Worker
from loop.services.confirmations import confirmation_request
from loop.services.deployments import NotConfirmed, deployment_promote
from tests.conftest import wait_until
from tests.loop.reports import crossover_report

pytestmark = pytest.mark.retiming


def test_a_cpu_worker_answers_the_retiming_and_the_gpu_promotion_stays_blocked(
        make_run, alice, bob, dana, loop_worker, gpu_worker, gpu_hardware, settings, tmp_path):
    settings.SERVING_EXPORT_DIR = tmp_path / "serving"
    wait_until(lambda: Worker.objects.filter(hardware=gpu_hardware).exists(), timeout_s=60)
    run = make_run(hardware=gpu_hardware)
    # a kept candidate with a GPU report, written directly: dispatching it would start an evaluation
    candidate = Candidate.objects.create(run=run, number=1, source="def forward(*a):\n    return None\n",
                                         source_hash="h", proposer="human", author=bob, status="kept", attempt=1)
    Evaluation.objects.create(candidate=candidate, attempt=1, worker="gpu-elsewhere", report=crossover_report())
    confirmation = confirmation_request(actor=dana, candidate=candidate)
    done = wait_until(lambda: Confirmation.objects.filter(pk=confirmation.pk).exclude(status="queued").first(),
                      timeout_s=90)
    assert done.status == "unavailable" and done.worker == Worker.objects.get(hardware=gpu_hardware).name
    assert done.result["reason"] == "not confirmable on cpu" and done.evaluated_by == "gpu-elsewhere"
    with pytest.raises(NotConfirmed, match=r"re-timing unavailable \(not confirmable on cpu\)"):
        deployment_promote(actor=dana, candidate=candidate, routes=[(0, 65536)])
