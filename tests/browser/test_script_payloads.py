"""Script payloads in a thesis, a skill and a candidate's source are shown as text and never run."""

import pytest
from playwright.sync_api import expect

from loop.services.skills import skill_edit
from tests.browser.conftest import in_thread, login
from tests.console import builders

pytestmark = pytest.mark.browser

PAYLOAD = "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">"
SKILL = ("---\ntitle: TMA\nkind: hardware\napplies_to: {hardware: [h200], models: [any], targets: [any]}\n"
         "sources: [\"guide\"]\n---\n" + PAYLOAD + "\n\n[click](javascript:window.__pwned=3)\n")


def assert_inert(page, text_fragment: str) -> None:
    assert page.evaluate("window.__pwned") is None
    expect(page.locator("body")).to_contain_text(text_fragment)


def test_script_payloads_are_shown_as_text_and_never_run(console_url, page, alice, bob):
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    thesis = in_thread(builders.make_thesis, alice, title=f"T {PAYLOAD}", body=f"# Body\n\n{PAYLOAD}")
    in_thread(skill_edit, actor=alice, key="hardware/h200/x.md", text=SKILL)
    run = in_thread(builders.make_run, alice, thesis=thesis)
    source = builders.source_variant("x", body=f"NOTE = '''{PAYLOAD}'''\n")
    candidate = in_thread(builders.evaluated, run, builders.guard_report(line=15), source=source)

    login(page, console_url, "bob")
    for url in (f"/theses/{thesis.pk}/", "/theses/", "/skills/view/hardware/h200/x.md", f"/runs/{run.pk}/",
                f"/candidates/{candidate.pk}/", "/audit/", "/"):
        page.goto(console_url + url)
        page.wait_for_load_state("load")
        assert page.evaluate("window.__pwned") is None, url
    page.goto(f"{console_url}/theses/{thesis.pk}/")
    assert_inert(page, "<script>window.__pwned = 1</script>")
    page.goto(f"{console_url}/skills/view/hardware/h200/x.md")
    assert_inert(page, "<img src=x onerror=")
    page.goto(f"{console_url}/candidates/{candidate.pk}/")
    page.locator("summary", has_text="Source").click()
    assert_inert(page, "window.__pwned = 1")

    page.goto(f"{console_url}/theses/{thesis.pk}/edit/")
    page.fill("#id_body", "**preview** " + PAYLOAD)
    expect(page.get_by_test_id("preview")).to_contain_text("<script>window.__pwned = 1</script>")
    expect(page.get_by_test_id("preview").locator("strong")).to_have_text("preview")
    assert page.evaluate("window.__pwned") is None and not dialogs
