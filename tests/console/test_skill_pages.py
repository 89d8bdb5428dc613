import io
import zipfile

import pytest
from django.urls import reverse

from loop.models import SkillDoc, SkillRevision
from loop.services.skills import skill_edit
from tests.console import builders  # noqa: F401  (shared fixtures module)

pytestmark = pytest.mark.django_db

KEY = "hardware/h200/tma.md"


def text(body="Use TMA for bulk copies.\n", title="TMA on sm_90"):
    return (f"---\ntitle: {title}\nkind: hardware\napplies_to: {{hardware: [h200], models: [any], targets: [any]}}\n"
            f"sources: [\"Hopper tuning guide\"]\n---\n{body}")


@pytest.fixture
def doc(alice):
    skill_edit(actor=alice, key=KEY, text=text())
    return SkillDoc.objects.get(key=KEY)


@pytest.mark.parametrize("who, allowed", [("owner", True), ("reviewer", True), ("stranger", False)])
def test_editing_a_skill_makes_a_new_revision(people, doc, who, allowed):
    response = people[who].post(reverse("skill_edit", args=[KEY]), {"text": text("Prefer TMA.\n"), "note": "shorter"})
    assert response.status_code == (302 if allowed else 403)
    assert doc.revisions.count() == (2 if allowed else 1)


def test_a_skill_without_front_matter_is_refused_next_to_the_field(as_alice, doc):
    response = as_alice.post(reverse("skill_edit", args=[KEY]), {"text": "no front matter", "note": ""})
    assert response.status_code == 400 and b'data-testid="error-text"' in response.content
    assert b"missing front matter" in response.content and doc.revisions.count() == 1


@pytest.mark.parametrize("who, allowed", [("owner", True), ("reviewer", True), ("stranger", False)])
def test_creating_a_skill(people, who, allowed):
    response = people[who].post(reverse("skill_new"), {"key": "models/dsv32/indexer.md", "text": text(), "note": ""})
    assert response.status_code == (302 if allowed else 403)
    assert SkillDoc.objects.filter(key="models/dsv32/indexer.md").exists() == allowed


def test_a_skill_key_that_leaves_the_tree_is_refused(as_alice):
    response = as_alice.post(reverse("skill_new"), {"key": "../../etc/x.md", "text": text(), "note": ""})
    assert response.status_code == 400 and not SkillDoc.objects.exists()


def test_the_history_shows_the_diff_between_any_two_revisions(as_charlie, alice, doc):
    skill_edit(actor=alice, key=KEY, text=text("Second.\n"))
    skill_edit(actor=alice, key=KEY, text=text("Third <script>alert(1)</script>\n"))
    page = as_charlie.get(reverse("skill_history", args=[KEY]), {"a": 1, "b": 3}).content.decode()
    assert 'data-testid="skill-diff"' in page and "Third" in page and "<script>alert(1)" not in page
    assert as_charlie.get(reverse("skill_history", args=[KEY]), {"a": 1, "b": 9}).status_code == 404


def test_a_script_in_a_skill_is_shown_as_text(as_charlie, alice):
    skill_edit(actor=alice, key=KEY, text=text("<script>alert('skill')</script>\n\n[x](javascript:alert(1))\n"))
    page = as_charlie.get(reverse("skill", args=[KEY])).content.decode()
    assert "<script>alert('skill')" not in page and 'href="javascript' not in page


def test_the_skill_preview_drops_the_front_matter(as_alice):
    page = as_alice.post(reverse("skill_preview"), {"text": text("**bold**\n")}).content.decode()
    assert "<strong>bold</strong>" in page and "applies_to" not in page


def test_download_is_a_zip_of_the_latest_revisions(as_charlie, alice, doc):
    skill_edit(actor=alice, key=KEY, text=text("Latest.\n"))
    response = as_charlie.get(reverse("skill_download"))
    archive = zipfile.ZipFile(io.BytesIO(response.content))
    assert archive.namelist() == [f"skills/{KEY}"] and b"Latest." in archive.read(f"skills/{KEY}")


@pytest.mark.parametrize("who, allowed", [("owner", True), ("reviewer", True), ("stranger", False)])
def test_export_and_import_files(people, settings, tmp_path, doc, who, allowed):
    settings.ARK_EXPORT_DIR = tmp_path.parent
    settings.SKILLS_DIR = tmp_path
    response = people[who].post(reverse("skill_export"), {"folder": tmp_path.name})
    assert response.status_code == (302 if allowed else 403)
    assert (tmp_path / KEY).exists() == allowed
    if allowed:
        (tmp_path / KEY).write_text(text("Edited on disk.\n"))
        people[who].post(reverse("skill_import"))
        assert SkillRevision.objects.filter(doc=doc).count() == 2
    else:
        assert people[who].post(reverse("skill_import")).status_code == 403
