"""First start (`manage.py bootstrap`): an admin login, the targets, the shipped skills and the shipped theses,
among them the FP8 indexer's running top-k with its measured result; running it again adds nothing."""

import pytest
from django.core.management import call_command

from loop.models import Thesis

pytestmark = pytest.mark.django_db


def test_bootstrap_ships_the_theses_once(settings, tmp_path, capsys):
    settings.VAR_DIR = tmp_path
    call_command("bootstrap", hardware="h200")
    first = capsys.readouterr().out
    theses = {t.title: t for t in Thesis.objects.all()}
    running = next(t for title, t in theses.items() if "running top-k" in title)
    assert len(theses) == 2 and running.target.name == "dsa_indexer_topk_fp8" and running.status == "backlog"
    assert "1142 us" in running.body and "699 us" in running.body  # the result it is shipped with
    assert first.count("thesis created for hardware h200") == 2 and (tmp_path / "admin-login.txt").exists()
    call_command("bootstrap", hardware="h200")
    assert Thesis.objects.count() == 2 and "thesis created" not in capsys.readouterr().out
