"""Issue 23: a misconfigured LLM proposer used to spend the run's budget failing. In the browser, starting an
LLM run against an endpoint whose key variable is not set shows what to fix (the endpoint, its URL, the
setting) and starts nothing. The other preflight answers (401, unlisted model, unreachable) are checked over
HTTP in tests/security/test_llm_endpoints.py."""

import json

import pytest
from playwright.sync_api import expect

from loop.models import Run
from tests.browser.conftest import in_thread, login
from tests.console import builders
from tests.loop.proposers.test_llm_proposer import ChatServer

pytestmark = pytest.mark.browser


@pytest.fixture
def endpoint(monkeypatch):
    """A fake OpenAI endpoint, configured for the console process (listed before console_url, so set first)
    with a key variable that is not set."""
    server = ChatServer(models=["other-model"], key="sk-right")
    monkeypatch.setenv("ARK_LLM_ENDPOINTS", json.dumps(
        {"local": {"url": server.url, "key_env": "ARK_TEST_LLM_KEY", "models": ["kernel-coder-7b"]}}))
    monkeypatch.delenv("ARK_TEST_LLM_KEY", raising=False)
    yield server
    server.close()


def test_starting_a_misconfigured_llm_run_says_what_to_fix_and_starts_nothing(endpoint, console_url, page, alice):
    thesis = in_thread(builders.make_thesis, alice)
    login(page, console_url, "alice")
    page.goto(f"{console_url}/theses/{thesis.pk}/")
    form = page.get_by_test_id("run-form")
    form.locator("select[name=proposer]").select_option("llm")
    form.get_by_test_id("start-run").click()
    errors = page.get_by_test_id("run-form").locator(".errorlist.nonfield")
    expect(errors).to_contain_text(f"The key for LLM endpoint 'local' ({endpoint.url}) is missing")
    expect(errors).to_contain_text("ARK_TEST_LLM_KEY is not set")
    assert endpoint.requests == [] and in_thread(Run.objects.count) == 0
