"""Issue 26, attack 1, and the LLM preflight (issue 23): a reviewer could point the loop at any URL and have the
worker send it the server's key. Endpoints are server configuration now; a run names one; the key goes only to
that endpoint's URL; a misconfigured endpoint is reported before anything is spent."""

import pytest
from django.urls import reverse

from loop.models import Candidate, Event, Run
from tests.loop.proposers.test_llm_proposer import (
    KEY,
    SEED,
    ChatServer,
    answer,
    chat_requests,
    endpoint_config,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("held_tasks")]  # no loop worker here


@pytest.fixture
def servers(monkeypatch, settings):
    """The configured endpoint, and an attacker's server that must never hear from ark."""
    monkeypatch.setenv("ARK_LLM_API_KEY", KEY)
    configured, attacker = ChatServer(key=KEY), ChatServer()
    settings.ARK_LLM_ENDPOINTS = endpoint_config(configured)
    yield configured, attacker
    configured.close()
    attacker.close()


def start(client, thesis, settings_json, proposer="llm"):
    return client.post(reverse("run_start", args=[thesis.pk]), {
        "proposer": proposer, "proposer_settings": settings_json, "hardware": "h200", "profile": "smoke",
        "budget_candidates": 3, "budget_gpu_minutes": 5, "review_mode": "gate"})


@pytest.mark.parametrize("key", ["base_url", "api_key", "API_KEY", "Authorization", "headers", "url"])
def test_a_reviewer_cannot_send_the_run_to_another_url_or_store_a_credential(as_bob, alice, servers, key):
    from tests.console import builders

    _, attacker = servers
    thesis = builders.make_thesis(alice)
    value = f'"{attacker.url}"' if key in ("base_url", "url") else '"Bearer sk-stolen"'
    response = start(as_bob, thesis, f'{{"model": "kernel-coder-7b", "{key}": {value}}}')
    page = response.content.decode()
    assert response.status_code == 400 and f"unknown setting &#x27;{key}&#x27;" in page
    assert "ARK_LLM_ENDPOINTS" in page
    assert not Run.objects.exists() and attacker.requests == []


def test_the_key_goes_only_to_the_configured_url(as_bob, alice, servers):
    from loop.proposers import llm
    from tests.console import builders

    configured, attacker = servers
    thesis = builders.make_thesis(alice)
    response = start(as_bob, thesis, '{"endpoint": "local", "model": "kernel-coder-7b"}')
    run = Run.objects.get()
    assert response.status_code == 302 and run.proposer_settings == {"endpoint": "local", "model": "kernel-coder-7b"}
    Run.objects.filter(pk=run.pk).update(proposer_settings={**run.proposer_settings, "seed_source": SEED})
    configured.replies.append(answer(SEED + "\n# next\n"))
    llm.propose(Run.objects.get(pk=run.pk))
    assert [r["path"] for r in configured.requests] == ["/v1/models", "/v1/models", "/v1/chat/completions"]
    assert {r["auth"] for r in configured.requests} == {f"Bearer {KEY}"}
    assert attacker.requests == []


def test_a_run_that_names_an_unknown_endpoint_or_model_is_refused_by_name(as_bob, alice, servers):
    from tests.console import builders

    thesis = builders.make_thesis(alice)
    page = start(as_bob, thesis, '{"endpoint": "elsewhere"}').content.decode()
    assert "Unknown LLM endpoint &#x27;elsewhere&#x27;; configured: local" in page
    page = start(as_bob, thesis, '{"model": "gpt-9"}').content.decode()
    assert "Model &#x27;gpt-9&#x27; is not allowed on LLM endpoint &#x27;local&#x27;" in page
    assert not Run.objects.exists()


def test_proposer_settings_are_checked_by_type_size_and_depth(as_bob, alice, servers):
    from tests.console import builders

    thesis = builders.make_thesis(alice)
    for body, message in [
        ('{"temperature": "hot"}', "temperature: a number from 0.0 to 2.0"),
        ('{"max_tokens": 1e12}', "max_tokens: from 1 to 200000"),
        ('{"max_tokens": 2.5}', "max_tokens: a whole number from 1 to 200000"),
        ("[" * 5000 + "]" * 5000, "nested deeper than 8 levels"),
        ('{"a":' * 5000 + "1" + "}" * 5000, "nested deeper than 8 levels"),
        ('{"seed_source": "' + "x" * 300_000 + '"}', "too large: at most 256 KB"),
    ]:
        response = start(as_bob, thesis, body, proposer="sweep" if "seed_source" in body else "llm")
        assert response.status_code == 400, body[:40]
        assert message in response.content.decode(), body[:40]
    assert not Run.objects.exists()


# --- preflight: the error says what to do, and nothing is spent ----------------------------------------


def preflight_page(client, thesis):
    response = start(client, thesis, "{}")
    assert response.status_code == 400 and not Run.objects.exists()
    return response.content.decode()


def test_preflight_names_the_missing_configuration(as_bob, alice, settings, monkeypatch):
    from tests.console import builders

    thesis = builders.make_thesis(alice)
    settings.ARK_LLM_ENDPOINTS, settings.ARK_LLM_BASE_URL = {}, ""
    assert "No LLM endpoint is configured: set ARK_LLM_ENDPOINTS" in preflight_page(as_bob, thesis)
    server = ChatServer(key=KEY)
    try:
        settings.ARK_LLM_ENDPOINTS = endpoint_config(server, key_env="ARK_TEST_LLM_KEY")
        monkeypatch.delenv("ARK_TEST_LLM_KEY", raising=False)
        page = preflight_page(as_bob, thesis)
        assert f"The key for LLM endpoint &#x27;local&#x27; ({server.url}) is missing" in page
        assert "ARK_TEST_LLM_KEY is not set" in page
        monkeypatch.setenv("ARK_TEST_LLM_KEY", "sk-wrong")
        page = preflight_page(as_bob, thesis)
        assert f"GET {server.url}/models answered HTTP 401" in page and "Incorrect API key provided" in page
        monkeypatch.setenv("ARK_TEST_LLM_KEY", KEY)
        server.models = ["some-other-model"]
        page = preflight_page(as_bob, thesis)
        assert "does not serve model &#x27;kernel-coder-7b&#x27;; its /models lists: some-other-model" in page
    finally:
        server.close()
    settings.ARK_LLM_ENDPOINTS = {"local": {"url": server.url, "key_env": "", "models": ["m"]}}  # closed now
    assert f"could not reach {server.url}/models" in preflight_page(as_bob, thesis)


def test_an_endpoint_that_breaks_during_a_run_pauses_it_without_spending_a_candidate(alice, servers, monkeypatch):
    from loop.proposers import llm
    from loop.services.runs import run_start
    from tests.console import builders

    configured, _ = servers
    run = run_start(actor=alice, thesis=builders.make_thesis(alice), proposer="llm",
                    proposer_settings={"endpoint": "local", "seed_source": SEED})
    monkeypatch.delenv("ARK_LLM_API_KEY")
    assert llm.propose(Run.objects.get(pk=run.pk)) is None
    run.refresh_from_db()
    assert run.status == "paused" and not Candidate.objects.filter(run=run).exists()
    assert run.stop_reason.startswith("paused by the loop: The key for LLM endpoint 'local'")
    paused = Event.objects.get(type="run.paused", subject_id=str(run.pk))
    assert paused.actor == "loop" and "ARK_LLM_API_KEY is not set" in paused.payload["reason"]
    assert chat_requests(configured) == []


def test_llm_check_reports_each_endpoint_and_model(servers, settings, capsys):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    configured, _ = servers
    call_command("llm_check")
    assert f"local kernel-coder-7b: ok ({configured.url})" in capsys.readouterr().out
    settings.ARK_LLM_ENDPOINTS = endpoint_config(configured, models=["kernel-coder-7b", "missing-model"])
    with pytest.raises(CommandError, match="1 endpoint/model pair"):
        call_command("llm_check")
    assert "does not serve model 'missing-model'" in capsys.readouterr().err
