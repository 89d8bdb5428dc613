"""The console's defences, checked route by route from console/urls.py: login on every page and on
the websocket, role checks and CSRF on every POST, a foreign Origin refused, login rate limiting,
user text rendered escaped, API keys never shown. (check --deploy and the production secret are in
tests/foundation/test_settings_and_migrations.py; the audit chain in tests/foundation/test_audit_log.py.)"""

import os

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.urls import URLPattern, get_resolver, reverse

from console.asgi import application
from loop.models import Candidate, Event, Run, ServingConfig, SkillRevision, Thesis
from loop.services.decisions import candidate_approve
from tests.console import builders
from tests.console.test_pages_render import SKILL

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("held_tasks")]  # no loop worker here

PUBLIC = {"login", "healthz"}
PAYLOAD = '<script>alert("ark-xss")</script>'


def named_routes() -> list[str]:
    """Every named route of console/urls.py itself (the admin site has its own login)."""
    return [p.name for p in get_resolver().url_patterns if isinstance(p, URLPattern) and p.name]


def route_args(world, name: str) -> list:
    """Arguments for a named route, from the names of its URL parameters (new routes need no entry here)."""
    (pattern,) = [p for p in get_resolver().url_patterns if isinstance(p, URLPattern) and p.name == name]
    config = world["config"]
    # a pk belongs to the object the path names first (theses/<pk>/runs/ starts a run of a thesis)
    owners = {"theses": world["thesis"].pk, "runs": world["run"].pk, "candidates": world["candidate"].pk,
              "users": world["thesis"].owner_id}
    values = {"target": config.target.name, "hardware": config.hardware, "version": config.version,
              "action": "pause", "key": "hardware/h200/tma.md"}
    args = []
    for parameter in pattern.pattern.converters:
        if parameter == "pk":
            args.append(owners[str(pattern.pattern).split("/")[0]])
        else:
            args.append(values[parameter])
    return args


def all_urls(world) -> dict[str, str]:
    return {name: reverse(name, args=route_args(world, name)) for name in named_routes()}


# POST actions, with a body that would succeed for someone allowed to do it
def action_posts(world) -> dict[str, dict]:
    thesis = world["thesis"]
    return {
        "thesis_new": {
            "title": "x",
            "body": "y",
            "target": thesis.target.name,
            "hardware": "h200",
            "priority": 0,
        },
        "thesis_edit": {
            "title": "x2",
            "body": "y2",
            "target": thesis.target.name,
            "hardware": "h200",
            "priority": 3,
            "status": "active",
        },
        "thesis_prioritise": {"priority": 7},
        "run_start": {
            "proposer": "sweep",
            "proposer_settings": "{}",
            "hardware": "h200",
            "profile": "smoke",
            "budget_candidates": 3,
            "budget_gpu_minutes": 5,
            "review_mode": "gate",
        },
        "skill_new": {"key": "hardware/h200/new.md", "text": SKILL, "note": "n"},
        "skill_edit": {"text": SKILL + "\nEdited.\n", "note": "n"},
        "skill_export": {},
        "skill_import": {},
        "run_action": {"reason": "stop"},
        "candidate_approve": {"note": "ok"},
        "candidate_veto": {"reason": "no", "confirm": "yes"},
        "candidate_rebenchmark": {},
        "candidate_regions_measure": {},
        "run_submit": {"source": "def forward(x):\n    return x\n", "action": "submit"},
        "candidate_promote": {
            "routes": "0 100000 candidate\n100000 inf default",
            "note": "",
            "password": "charlie-password-1",
        },
        "deployment_rollback": {"to_version": 1, "password": "charlie-password-1"},
        "candidate_regions_promote": {"based_on": 1, "note": "", "password": "charlie-password-1"},
        "deployment_workload": {},
        "candidate_retime": {},
        "user_roles": {"roles": ["reviewer"]},
    }


def state() -> tuple:
    return (
        Event.objects.count(),
        Thesis.objects.count(),
        SkillRevision.objects.count(),
        Run.objects.count(),
        ServingConfig.objects.count(),
        sorted(Candidate.objects.values_list("pk", "status")),
        sorted(Thesis.objects.values_list("pk", "title", "priority")),
        sorted(Run.objects.values_list("pk", "status")),
    )


def test_every_named_route_sends_an_anonymous_visitor_to_the_login_page(world, client):
    urls = all_urls(world)
    assert len(urls) >= 30
    for name, url in urls.items():
        response = client.get(url)
        if name in PUBLIC:
            assert response.status_code == 200, (name, response.status_code)
        else:
            assert response.status_code == 302 and response["Location"].startswith(reverse("login")), name
        response = client.post(url, {})
        if name not in PUBLIC:
            assert response.status_code == 302 and response["Location"].startswith(reverse("login")), name


def test_static_files_are_public_and_admin_has_its_own_login(client):
    assert client.get("/admin/").status_code == 302
    assert "/admin/login/" in client.get("/admin/")["Location"]


def test_a_viewer_posting_any_action_gets_403_and_nothing_changes(world, as_charlie):
    posts = action_posts(world)
    urls = all_urls(world)
    # Pages read by GET, and the run's TraceSet export (a read: a viewer may download it), are not actions.
    reads = {"candidate", "candidate_regions", "run_traceset"}
    assert set(posts) >= {n for n in urls if n.startswith(("candidate_", "deployment_", "run_", "user_"))} - reads - {
        "deployment_download"
    }
    for name, body in posts.items():
        before = state()
        response = as_charlie.post(urls[name], body)
        assert response.status_code == 403, (name, response.status_code)
        assert state() == before, name
    for action in ("resume", "stop"):
        before = state()
        assert as_charlie.post(reverse("run_action", args=[world["run"].pk, action])).status_code == 403
        assert state() == before


def test_every_post_without_a_csrf_token_is_refused(world, alice):
    alice.is_superuser = True
    alice.save()
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    urls = all_urls(world)
    for name, body in action_posts(world).items():
        before = state()
        response = client.post(urls[name], body)
        assert response.status_code == 403, (name, response.status_code)
        assert state() == before, name
    for name in ("logout", "markdown_preview", "skill_preview"):
        assert client.post(urls[name], {"text": "x", "body": "x"}).status_code == 403, name
    anonymous = Client(enforce_csrf_checks=True)
    assert (
        anonymous.post(reverse("login"), {"username": "alice", "password": "alice-password-1"}).status_code
        == 403
    )


# --- websocket --------------------------------------------------------------------------------------


async def _connect(user, origin: bytes, path: str = "/ws/events/", host: bytes = b"127.0.0.1:8000"):
    client = Client()
    await sync_to_async(client.force_login)(user)
    headers = [(b"origin", origin), (b"host", host),
               (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())]
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, code = await communicator.connect(timeout=5)
    await communicator.disconnect()
    return connected, code


@pytest.mark.django_db(transaction=True)
async def test_the_websocket_refuses_a_foreign_origin_and_accepts_its_own(alice):
    assert (await _connect(alice, b"http://127.0.0.1:8000"))[0] is True
    # Issue 26: any port of an allowed host was accepted; scheme, host and port must match exactly.
    for origin in (b"http://evil.example", b"http://127.0.0.1.evil.example", b"null", b"http://127.0.0.1:9911",
                   b"http://127.0.0.1", b"https://127.0.0.1:8000", b"http://localhost:8000"):
        connected, _ = await _connect(alice, origin)
        assert connected is False, origin
    assert (await _connect(alice, b"http://127.0.0.1:8000", host=b"evil.example:8000"))[0] is False  # not allowed
    assert (await _connect(alice, b"http://127.0.0.1:8000", host=b""))[0] is False


@pytest.mark.django_db(transaction=True)
async def test_the_websocket_refuses_an_anonymous_user_on_a_run_page():
    communicator = WebsocketCommunicator(
        application, "/ws/runs/1/", headers=[(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
    )
    connected, code = await communicator.connect(timeout=5)
    assert connected is False and code == 4401


# --- login throttling: tests/security/test_login_throttle.py ------------------------------------------


# --- user text is escaped everywhere it is shown -----------------------------------------------------


def test_script_payloads_in_every_user_editable_field_are_rendered_escaped(alice, bob, dana, as_charlie):
    from loop.services.decisions import candidate_veto
    from loop.services.deployments import deployment_promote
    from loop.services.skills import skill_edit

    thesis = builders.make_thesis(
        alice, title=f"T {PAYLOAD}", body=f"B {PAYLOAD}", constraints=f"C {PAYLOAD}"
    )
    skill_edit(actor=alice, key="hardware/h200/xss.md", text=SKILL + f"\n{PAYLOAD}\n", note=f"N {PAYLOAD}")
    run = builders.make_run(alice, thesis=thesis)
    source = builders.source_variant("x", body=f"NOTE = '''{PAYLOAD}'''\n")
    kept = builders.evaluated(run, builders.passing_report(), source=source)
    candidate_approve(candidate=kept, actor=bob, note=f"A {PAYLOAD}")
    vetoed = builders.evaluated(run, builders.passing_report(), tag="v")
    candidate_veto(candidate=vetoed, actor=bob, reason=f"V {PAYLOAD}")
    kept.refresh_from_db()
    config = deployment_promote(
        actor=dana,
        candidate=kept,
        routes=[{"lo": 0, "hi": 100000, "kernel": "candidate"}],
        note=f"P {PAYLOAD}",
    )
    pages = [
        reverse("theses"),
        reverse("thesis", args=[thesis.pk]),
        reverse("thesis_edit", args=[thesis.pk]),
        reverse("skill", args=["hardware/h200/xss.md"]),
        reverse("skill_edit", args=["hardware/h200/xss.md"]),
        reverse("skill_history", args=["hardware/h200/xss.md"]),
        reverse("run", args=[run.pk]),
        reverse("candidate", args=[kept.pk]),
        reverse("candidate", args=[vetoed.pk]),
        reverse("dashboard"),
        reverse("deployment", args=[config.target.name, config.hardware]),
        reverse("audit"),
    ]
    alice.is_superuser = True
    alice.save()
    owner = Client()
    owner.force_login(alice)
    shown = set()
    for url in pages:
        for client in (as_charlie, owner):
            html = client.get(url).content.decode()
            assert "<script>alert" not in html, url
            for marker in ("T ", "B ", "C ", "N ", "A ", "V ", "P "):
                if f"{marker}&lt;script&gt;alert(" in html:
                    shown.add(marker)
            if "NOTE = " in html and "&lt;script&gt;" in html:
                shown.add("source")
    assert shown >= {"T ", "B ", "C ", "V ", "source"}, shown


# --- secrets ------------------------------------------------------------------------------------------


def test_an_llm_api_key_in_the_environment_appears_on_no_page_and_in_no_event(world, monkeypatch, settings, as_alice):
    from loop.proposers import llm
    from tests.loop.proposers.test_llm_proposer import ChatServer, endpoint_config

    key = "sk-ark-test-" + os.urandom(12).hex()
    monkeypatch.setenv("ARK_LLM_API_KEY", key)
    server = ChatServer(key=key)
    settings.ARK_LLM_ENDPOINTS = endpoint_config(server)
    try:
        assert llm.api_key() == key
        thesis = world["thesis"]
        response = as_alice.post(
            reverse("run_start", args=[thesis.pk]),
            {
                "proposer": "llm",
                "proposer_settings": "{}",
                "hardware": "h200",
                "profile": "smoke",
                "budget_candidates": 2,
                "budget_gpu_minutes": 5,
                "review_mode": "gate",
            },
        )
        assert response.status_code == 302 and Run.objects.filter(proposer="llm").exists()
    finally:
        server.close()
    urls = all_urls(world)
    for name, url in urls.items():
        if name in ("logout",):
            continue
        body = as_alice.get(url).content.decode(errors="replace")
        assert key not in body, name
    for run in Run.objects.all():
        assert key not in as_alice.get(reverse("run", args=[run.pk])).content.decode()
    for event in Event.objects.all():
        assert key not in str(event.payload), event.type
