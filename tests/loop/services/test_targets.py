"""Target rows mirror gpu_worker's registry."""

from django.core.management import call_command

from gpu_worker.targets import TARGETS
from loop.models import Event, Target


def test_sync_creates_each_registered_target_once_and_updates_a_changed_one(db, capsys):
    call_command("sync_targets")
    assert set(Target.objects.values_list("name", flat=True)) == set(TARGETS)
    topk = Target.objects.get(name="dsa_topk")
    assert topk.dsls == list(TARGETS["dsa_topk"].dsls) and topk.axes["n_ctx"] == list(TARGETS["dsa_topk"].axes["n_ctx"])
    added = Event.objects.filter(type="target.added").count()
    Target.objects.filter(name="dsa_topk").update(dsls=["cute"])
    call_command("sync_targets")
    assert Target.objects.get(name="dsa_topk").dsls == list(TARGETS["dsa_topk"].dsls)
    assert Event.objects.filter(type="target.added").count() == added
    assert Event.objects.filter(type="target.updated").count() == 1
    assert "dsa_topk" in capsys.readouterr().out
