from pathlib import Path

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from loop.models import Event, SkillDoc, SkillRevision
from loop.services.skills import skill_edit, skill_export, skill_import_tree

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[3]


def text(body="Use TMA.\n"):
    return ("---\ntitle: TMA\nkind: hardware\napplies_to: {hardware: [h200], models: [any], targets: [any]}\n"
            "sources: [\"guide\"]\n---\n" + body)


def test_an_edit_is_a_new_numbered_revision_by_its_author(alice, bob):
    skill_edit(actor=alice, key="hardware/h200/tma.md", text=text())
    revision = skill_edit(actor=bob, key="hardware/h200/tma.md", text=text("Prefer TMA.\n"), note="tighter")
    assert (revision.number, revision.author, revision.note) == (2, bob, "tighter")
    assert [e.type for e in Event.objects.order_by("id")] == ["skill.created", "skill.edited"]


def test_saving_the_same_text_adds_no_revision(alice):
    skill_edit(actor=alice, key="hardware/h200/tma.md", text=text())
    skill_edit(actor=alice, key="hardware/h200/tma.md", text=text().replace("\n", "\r\n"))
    assert SkillRevision.objects.count() == 1


def test_it_refuses_bad_front_matter_and_keys_outside_the_tree(alice):
    with pytest.raises(ValidationError, match="front matter"):
        skill_edit(actor=alice, key="hardware/h200/tma.md", text="no front matter")
    with pytest.raises(ValidationError):
        skill_edit(actor=alice, key="../escape.md", text=text())
    assert not SkillDoc.objects.exists()


def test_a_viewer_may_not_edit_import_or_export(charlie, tmp_path):
    for call in (lambda: skill_edit(actor=charlie, key="a/b.md", text=text()),
                 lambda: skill_import_tree(actor=charlie, root=tmp_path),
                 lambda: skill_export(actor=charlie, root=tmp_path)):
        with pytest.raises(PermissionDenied):
            call()


def test_the_shipped_skills_import_and_export_byte_for_byte(alice, tmp_path):
    result = skill_import_tree(actor=alice, root=ROOT / "skills")
    assert result["created"] and not result["updated"]
    again = skill_import_tree(actor=alice, root=ROOT / "skills")
    assert not again["created"] and not again["updated"] and len(again["unchanged"]) == len(result["created"])
    written = skill_export(actor=alice, root=tmp_path)
    assert len(written) == len(result["created"])
    for path in written:
        key = path.relative_to(tmp_path).as_posix()
        assert path.read_bytes() == (ROOT / "skills" / key).read_bytes()


def test_an_import_with_one_bad_file_imports_nothing(alice, tmp_path):
    (tmp_path / "hardware").mkdir()
    (tmp_path / "hardware" / "good.md").write_text(text())
    (tmp_path / "hardware" / "bad.md").write_text("no front matter")
    with pytest.raises(ValidationError, match="bad.md"):
        skill_import_tree(actor=alice, root=tmp_path)
    assert not SkillDoc.objects.exists()


def test_an_import_of_a_changed_file_adds_a_revision(alice, tmp_path):
    (tmp_path / "x.md").write_text(text())
    skill_import_tree(actor=alice, root=tmp_path)
    (tmp_path / "x.md").write_text(text("Changed.\n"))
    assert skill_import_tree(actor=alice, root=tmp_path)["updated"] == ["x.md"]
    assert SkillDoc.objects.get(key="x.md").revisions.count() == 2
