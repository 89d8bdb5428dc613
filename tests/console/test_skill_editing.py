"""Skills that lose nothing: a save is made against the revision the editor was opened from; a conflicting save
shows both versions and writes neither over the other; a save that changes nothing makes no revision; 256 KB
is the limit, refused with a message that says what to do."""

import time

import pytest
from django.urls import reverse

from loop.models import SkillDoc, SkillRevision
from loop.services.skills import MAX_SKILL_BYTES, skill_edit
from tests.console.test_skill_pages import KEY, text

pytestmark = pytest.mark.django_db


@pytest.fixture
def doc(alice):
    skill_edit(actor=alice, key=KEY, text=text())
    return SkillDoc.objects.get(key=KEY)


def _save(client, body, base, note=""):
    return client.post(reverse("skill_edit", args=[KEY]), {"text": text(body), "note": note, "base_revision": base})


def test_the_editor_carries_the_revision_it_was_opened_from(as_alice, doc):
    page = as_alice.get(reverse("skill_edit", args=[KEY])).content.decode()
    assert 'name="base_revision" value="1"' in page and 'data-testid="skill-preview"' in page


def test_a_later_save_from_an_older_revision_shows_both_and_overwrites_nothing(as_alice, as_bob, doc):
    assert _save(as_alice, "Alice's paragraph.\n", 1).status_code == 302
    response = _save(as_bob, "Bob's paragraph.\n", 1, note="bob")
    assert response.status_code == 409
    page = response.content.decode()
    assert 'data-testid="skill-conflict"' in page and "revision 2 was saved since by" in page and "alice" in page
    assert "Alice&#x27;s paragraph." in page or "Alice's paragraph." in page  # theirs, read-only
    assert "Bob&#x27;s paragraph." in page or "Bob's paragraph." in page  # yours, still in the editor
    assert 'name="base_revision" value="2"' in page and 'data-testid="conflict-diff"' in page
    assert [r.number for r in SkillRevision.objects.filter(doc=doc)] == [2, 1]  # nothing written
    # saving again from the conflict page (knowing revision 2) goes through
    assert _save(as_bob, "Alice's paragraph.\nBob's paragraph.\n", 2).status_code == 302
    latest = SkillRevision.objects.filter(doc=doc).first()
    assert latest.number == 3 and "Alice's" in latest.text and "Bob's" in latest.text


def test_a_save_that_changes_nothing_makes_no_revision(as_alice, doc):
    response = as_alice.post(reverse("skill_edit", args=[KEY]), {"text": text(), "note": "", "base_revision": 1},
                             follow=True)
    assert "Nothing changed: revision 1 stays the latest." in response.content.decode()
    assert SkillRevision.objects.filter(doc=doc).count() == 1


def test_the_same_text_saved_from_an_old_revision_is_no_conflict(as_alice, as_bob, doc):
    _save(as_alice, "Same.\n", 1)
    assert _save(as_bob, "Same.\n", 1).status_code == 302
    assert SkillRevision.objects.filter(doc=doc).count() == 2


def test_a_skill_over_the_limit_is_refused_with_what_to_do(as_alice, doc):
    big = "x" * (MAX_SKILL_BYTES + 1)
    response = _save(as_alice, big, 1)
    assert response.status_code == 400
    page = response.content.decode()
    assert "the limit is 256 KB" in page and "Split it into smaller skills" in page
    assert SkillRevision.objects.filter(doc=doc).count() == 1


def test_a_skill_at_the_limit_saves_and_views(as_alice, doc, capsys):
    """Not a timed test (the shared test machine's load varies): it prints the figures for docs/operations.md."""
    para = "## Section\n\nSome *text* with `code` and a [link](https://example.com) and more words.\n\n- one\n- two\n\n"
    body = para * ((MAX_SKILL_BYTES - len(text(""))) // len(para))
    clock = (time.perf_counter(), time.process_time())
    assert _save(as_alice, body, 1).status_code == 302
    saved = (time.perf_counter() - clock[0], time.process_time() - clock[1])
    clock = (time.perf_counter(), time.process_time())
    page = as_alice.get(reverse("skill", args=[KEY]))
    viewed = (time.perf_counter() - clock[0], time.process_time() - clock[1])
    assert page.status_code == 200 and page.content.count(b"<h2>Section</h2>") == body.count("## Section")
    clock = time.perf_counter()
    assert as_alice.get(reverse("skill", args=[KEY])).content.count(b"<h2>Section</h2>") == body.count("## Section")
    again = time.perf_counter() - clock
    with capsys.disabled():
        print(f"\n256 KB skill (wall / CPU ms): save {saved[0] * 1000:.0f} / {saved[1] * 1000:.0f}, first view "
              f"{viewed[0] * 1000:.0f} / {viewed[1] * 1000:.0f}, next view {again * 1000:.0f} wall")


def test_export_writes_into_a_named_folder_outside_the_checkout(as_alice, doc, settings, tmp_path):
    settings.ARK_EXPORT_DIR = tmp_path
    page = as_alice.get(reverse("skills")).content.decode()
    assert f"into {tmp_path}/" in page and 'name="folder" value="skills-' in page
    response = as_alice.post(reverse("skill_export"), {"folder": "mine/today"}, follow=True)
    assert (tmp_path / "mine" / "today" / KEY).read_text() == text()
    assert f"Wrote 1 skill files under {tmp_path / 'mine' / 'today'}" in response.content.decode()


@pytest.mark.parametrize("folder", ["../out", "/tmp/elsewhere", "a/../../b"])
def test_export_refuses_a_folder_that_leaves_the_export_root(as_alice, doc, settings, tmp_path, folder):
    settings.ARK_EXPORT_DIR = tmp_path / "exports"
    page = as_alice.post(reverse("skill_export"), {"folder": folder}, follow=True).content.decode()
    assert "Export refused, nothing written" in page
    assert not any(tmp_path.rglob("*.md")) and not (tmp_path.parent / "out").exists()


def test_export_refuses_the_checkout_itself(as_alice, doc, settings):
    settings.ARK_EXPORT_DIR = settings.BASE_DIR / "skills"
    page = as_alice.post(reverse("skill_export"), {"folder": "copy"}, follow=True).content.decode()
    assert "inside the ark checkout" in page and not (settings.BASE_DIR / "skills" / "copy").exists()
