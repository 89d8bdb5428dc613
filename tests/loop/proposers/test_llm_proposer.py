"""The LLM proposer against a local server that speaks the OpenAI chat-completions protocol."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from loop.models import Candidate, Event, Run, SkillDoc, SkillRevision
from loop.proposers import llm

ROOT = Path(__file__).resolve().parents[3]
SEED = (ROOT / "gpu_worker/candidates/dsa_topk/seed.py").read_text()
KEY = "sk-test-0123456789-secret"


class ChatServer:
    """Answers each POST /v1/chat/completions with the next queued reply (content or an HTTP status), and
    GET /v1/models with `models` (401 when `key` is set and the request does not carry it)."""

    def __init__(self, models=("kernel-coder-7b",), key=None):
        self.replies, self.requests, self.models, self.key = [], [], list(models), key
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _json(self, status, value):
                data = json.dumps(value).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                server.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": None})
                if self.path != "/v1/models":
                    return self._json(404, {"error": {"message": "not found"}})
                if server.key and self.headers.get("Authorization") != f"Bearer {server.key}":
                    return self._json(401, {"error": {"message": "Incorrect API key provided"}})
                self._json(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in server.models]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
                reply = server.replies.pop(0)
                if isinstance(reply, int):
                    data = json.dumps({"error": {"message": "overloaded", "type": "server_error"}}).encode()
                    self.send_response(reply)
                else:
                    data = json.dumps({
                        "id": "chatcmpl-1", "object": "chat.completion", "created": 1767225600,
                        "model": body["model"], "choices": [{"index": 0, "finish_reason": "stop",
                                                            "message": {"role": "assistant", "content": reply}}],
                        "usage": {"prompt_tokens": 1200, "completion_tokens": 340, "total_tokens": 1540},
                    }).encode()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def endpoint_config(server, key_env="ARK_LLM_API_KEY", models=None) -> dict:
    """ARK_LLM_ENDPOINTS naming the fake server as endpoint "local"."""
    return {"local": {"url": server.url, "key_env": key_env, "models": list(models or server.models)}}


@pytest.fixture
def chat(monkeypatch, settings):
    monkeypatch.setenv("ARK_LLM_API_KEY", KEY)
    server = ChatServer(key=KEY)
    settings.ARK_LLM_ENDPOINTS = endpoint_config(server)
    yield server
    server.close()


def chat_requests(server):
    """The chat-completion requests (each proposal's preflight GET /v1/models left out)."""
    return [r for r in server.requests if r["path"] == "/v1/chat/completions"]


@pytest.fixture
def llm_run(make_run, chat):
    run = make_run(proposer="llm", proposer_settings={"endpoint": "local", "model": "kernel-coder-7b",
                                                      "seed_source": SEED})
    chat.requests.clear()  # run_start's preflight
    return run


def answer(source, prose="Fewer passes."):
    return f"Here is the candidate.\n\n```python\n{source}```\n\n{prose}"


def everything_stored(run):
    rows = [json.dumps(c.proposal) + c.reason_text + c.source for c in Candidate.objects.filter(run=run)]
    rows += [json.dumps(e.payload) for e in Event.objects.all()]
    rows += [json.dumps(Run.objects.get(pk=run.pk).proposer_settings)]
    return "\n".join(rows)


def test_it_proposes_the_fenced_source_and_records_the_exact_prompt(llm_run, chat):
    better = SEED.replace('PARAMS = {"BLOCK": 4096, "num_warps": 8}', 'PARAMS = {"BLOCK": 8192, "num_warps": 8}')
    chat.replies.append(answer(better))
    candidate = llm.propose(llm_run)
    assert (candidate.status, candidate.proposer, candidate.source) == ("proposed", "llm", better)
    (request,) = chat_requests(chat)
    assert request["path"] == "/v1/chat/completions" and request["auth"] == f"Bearer {KEY}"
    assert request["body"]["model"] == "kernel-coder-7b"
    assert candidate.proposal["messages"] == request["body"]["messages"]
    assert candidate.proposal["tokens"] == {"prompt": 1200, "completion": 340, "total": 1540}
    assert candidate.proposal["latency_ms"] >= 0 and candidate.proposal["model"] == "kernel-coder-7b"
    system, user = (m["content"] for m in request["body"]["messages"])
    assert "Incremental top-k" in user and "Keep only the running top-k." in user and "exact as a set" in user
    assert "_topk_row_kernel" in user  # the seed's source, the incumbent being the default kernel
    assert "Forbidden shortcuts" in user
    assert "skills/rules/forbidden-shortcuts.md" in system  # from the skills files
    assert "skills/hardware/h200/" in system and "skills/hardware/h100/" not in system
    assert KEY not in everything_stored(llm_run)


def test_the_prompt_carries_the_last_results_with_their_reasons_and_the_incumbent(llm_run, chat):
    Candidate.objects.create(run=llm_run, number=1, source=SEED, source_hash="x", proposer="llm", status="kept",
                             reason_code="faster", reason_text="1.2x the incumbent")
    incumbent = Candidate.objects.get(run=llm_run, number=1)
    Run.objects.filter(pk=llm_run.pk).update(incumbent=incumbent)
    Candidate.objects.create(run=llm_run, number=2, source="x", source_hash="y", proposer="llm", status="reverted",
                             reason_code="guard:thread", reason_text="imports threading")
    chat.replies.append("no code today")
    llm.propose(Run.objects.get(pk=llm_run.pk))
    user = chat_requests(chat)[0]["body"]["messages"][1]["content"]
    assert "candidate 2 (llm): reverted, guard:thread: imports threading" in user
    assert "The incumbent (candidate 1" in user


def test_skills_come_from_the_database_when_it_has_them(llm_run, chat, alice):
    doc = SkillDoc.objects.create(key="hardware/h200/notes.md")
    text = ("---\ntitle: Edited notes\nkind: hardware\napplies_to: {hardware: [h200], models: [any], "
            "targets: [any]}\nsources: [\"the team\"]\n---\nUse 132 CTAs.\n")
    SkillRevision.objects.create(doc=doc, number=1, text=text.replace("132", "64"), author=alice)
    SkillRevision.objects.create(doc=doc, number=2, text=text, author=alice)
    chat.replies.append(answer(SEED + "\n# db skills\n"))
    candidate = llm.propose(llm_run)
    system = chat_requests(chat)[0]["body"]["messages"][0]["content"]
    assert "Use 132 CTAs." in system and "Use 64 CTAs." not in system
    assert candidate.proposal["skills"] == ["hardware/h200/notes.md"]


@pytest.mark.parametrize("reply, reason", [
    ("I would rather not write code.", "no fenced python block"),
    ("```python\ndef forward(:\n```", "syntax error"),
    ("```python\nimport torch\ndef forward(logits, lengths, k):\n    return torch.topk(logits, k).indices\n```",
     "target's DSL"),
])
def test_an_unusable_answer_is_a_rejected_proposal_not_a_crash(llm_run, chat, reply, reason):
    chat.replies.append(reply)
    candidate = llm.propose(llm_run)
    assert (candidate.status, candidate.reason_code) == ("reverted", "error")
    assert candidate.reason_text.startswith("Unusable proposal") and reason in candidate.reason_text
    assert candidate.proposal["answer"] == reply and candidate.proposal["tokens"]["total"] == 1540
    assert candidate.decisions.get().reason_code == "error"
    assert Event.objects.filter(type="candidate.rejected_proposal", subject_id=str(candidate.pk)).exists()


def test_an_endpoint_failure_is_a_rejected_proposal_without_the_key(llm_run, chat):
    chat.replies.extend([500, 500])  # the client retries once
    candidate = llm.propose(llm_run)
    assert (candidate.status, candidate.reason_code) == ("reverted", "error")
    assert "the LLM endpoint failed" in candidate.reason_text
    assert KEY not in everything_stored(llm_run)


def test_parse_answer_prefers_the_block_that_defines_forward():
    text = "```python\nx = 1\n```\nthen\n```py\nimport triton\ndef forward(a):\n    return a\n```"
    assert llm.parse_answer(text) == "import triton\ndef forward(a):\n    return a\n"
    assert llm.parse_answer("```\ndef forward(a):\n    pass\n```") == "def forward(a):\n    pass\n"
    assert llm.parse_answer("") is None


def test_an_answer_arriving_after_the_run_stopped_records_nothing(llm_run, chat, alice):
    from loop.services.runs import run_stop

    run_stop(run=llm_run, actor=alice)
    chat.replies.append("no code")
    assert llm.propose(Run.objects.get(pk=llm_run.pk)) is None
    assert not Candidate.objects.filter(run=llm_run).exists()


def test_an_edit_in_the_console_changes_the_next_prompt(llm_run, chat, alice):
    from django.conf import settings

    from loop.services.skills import skill_edit, skill_import_tree

    skill_import_tree(actor=alice, root=settings.SKILLS_DIR)
    key = "hardware/h200/specs-and-ceilings.md"
    original = SkillRevision.objects.filter(doc__key=key).order_by("-number").first().text
    chat.replies += [answer(SEED + "\n# one\n"), answer(SEED + "\n# two\n")]
    llm.propose(llm_run)
    skill_edit(actor=alice, key=key, text=original + "\nMeasured today: keep 4 CTAs per SM busy.\n", note="new figure")
    llm.propose(Run.objects.get(pk=llm_run.pk))
    before, after = (r["body"]["messages"][0]["content"] for r in chat_requests(chat))
    assert "keep 4 CTAs per SM busy" not in before
    assert "keep 4 CTAs per SM busy" in after
    assert "skills/models/deepseek-v3.2/" in after and "skills/hardware/b200/" not in after
