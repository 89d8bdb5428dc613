"""Re-importing the same reports creates no duplicate runs, whatever path they are read from; a folder
with new reports beside imported ones adds only the new ones (loop/services/imports.py, content_key)."""

import json
import shutil

from loop.models import Candidate, Run
from loop.services.imports import reports_import
from tests.loop.reports import crossover_report, report, shape_result


def _write(folder, name, data):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(data))


def test_the_same_reports_from_another_folder_add_nothing(tmp_path, topk_target, alice):
    first = tmp_path / "h200"
    _write(first, "dsa_topk-best.json", crossover_report(candidate_id="best"))
    _write(first, "dsa_topk-slow.json", report(candidate_id="slow", shapes=[shape_result(4, 4096, 1.2)]))
    assert len(reports_import(path=first, actor=alice)) == 1
    copy = tmp_path / "copy" / "h200"
    shutil.copytree(first, copy)
    assert reports_import(path=copy, actor=alice) == []
    # the same reports re-serialised (other whitespace, other key order) are the same content
    again = tmp_path / "again"
    for file in first.glob("*.json"):
        again.mkdir(exist_ok=True)
        (again / file.name).write_text(json.dumps(json.loads(file.read_text()), indent=2, sort_keys=True))
    assert reports_import(path=again, actor=alice) == []
    assert Run.objects.count() == 1 and Candidate.objects.count() == 2


def test_a_new_report_beside_imported_ones_is_the_only_one_added(tmp_path, topk_target, alice):
    folder = tmp_path / "h200"
    _write(folder, "dsa_topk-best.json", crossover_report(candidate_id="best"))
    reports_import(path=folder, actor=alice)
    _write(folder, "dsa_topk-later.json", report(candidate_id="later", shapes=[shape_result(4, 4096, 0.9)]))
    runs = reports_import(path=folder, actor=alice)
    assert len(runs) == 1
    assert [c.proposal["label"] for c in runs[0].candidates.all()] == ["later"]
    assert Candidate.objects.count() == 2
    keys = list(Candidate.objects.values_list("proposal__content_key", flat=True))
    assert len(set(keys)) == 2 and all(k.startswith("sha256:") for k in keys)
