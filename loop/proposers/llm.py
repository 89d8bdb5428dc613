"""An LLM proposer: any OpenAI-compatible chat-completions endpoint.

The endpoint is one the server is configured with (loop/proposer_config.py, ARK_LLM_ENDPOINTS): the
run names it and a model it allows; the key comes from the environment variable the endpoint names and is
sent only to that endpoint's URL, never stored, shown or logged. Before each proposal the endpoint is
checked (`llm_preflight`); a misconfigured one pauses the run with the reason instead of spending its
candidates. The exact prompt, the answer, tokens and latency are stored on the
candidate's `proposal`. An unusable answer (or a failed call) is recorded as a rejected
proposal, a candidate reverted with reason `error`, and never crashes the loop.
"""

from __future__ import annotations

import logging
import re
import time

from django.conf import settings
from django.core.exceptions import ValidationError

from loop import skillfiles, where_time
from loop.models import Candidate, Run, SkillDoc
from loop.proposer_config import llm_endpoints, llm_preflight
from loop.services.candidates import CandidateRejected, candidate_record_rejected_proposal, candidate_submit
from loop.services.runs import run_hold
from loop.services.targets import target_contract, target_seed_source

log = logging.getLogger(__name__)
PROPOSER = "llm"
RECENT_RESULTS = 12
MAX_ANSWER_CHARS = 40_000
_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)

SYSTEM = (
    "You are a GPU kernel engineer. You improve one kernel for a target operation. Answer with exactly one "
    "fenced ```python block holding the complete candidate source file, then at most three sentences on "
    "what you changed and why. The file defines forward(...) with the target's signature, launches its "
    "work through the target's required DSL, and may define PARAMS (defaults) and SPACE (values a sweep "
    "may try). It gets no files, network, environment, threads or streams of its own. Every forbidden "
    "shortcut below is detected and recorded as a failure."
)

FORBIDDEN_SHORTCUTS = (
    "side streams or threads; lazy or cached outputs; falling back to torch for the target's op; "
    "loosening tolerances or reading the expected answer; special-casing benchmark shapes; changing "
    "CUDA-graph, context or batch settings; editing or timing the harness; mutating inputs."
)


def api_keys() -> list[str]:
    """Every configured endpoint's key that is set (for redaction)."""
    keys = [endpoint.key() for endpoint in llm_endpoints().values()]
    return [key for key in keys if key]


def api_key() -> str | None:
    keys = api_keys()
    return keys[0] if keys else None


def endpoint(run: Run) -> dict:
    """The run's endpoint and model, checked against the server's configuration and by a /models call."""
    conf = run.proposer_settings or {}
    configured, model = llm_preflight(conf)
    return {
        "endpoint": configured, "base_url": configured.url, "model": model,
        "temperature": float(conf.get("temperature", 0.7)),
        "max_tokens": int(conf.get("max_tokens", 8000)),
        "timeout_s": float(conf.get("timeout_s", getattr(settings, "ARK_LLM_TIMEOUT_S", 300))),
    }


def skills_for(run: Run) -> list[skillfiles.SkillFile]:
    """The skills that apply to the run: the database's latest revisions, else the files."""
    docs = list(SkillDoc.objects.prefetch_related("revisions"))
    if docs:
        skills = []
        for doc in docs:
            latest = max(doc.revisions.all(), key=lambda r: r.number, default=None)
            if latest is None:
                continue
            try:
                skills.append(skillfiles.parse(doc.key, latest.text))
            except ValueError:
                log.warning("skill %s: latest revision does not parse; left out of the prompt", doc.key)
    else:
        skills = skillfiles.load_tree(settings.SKILLS_DIR)
    thesis = run.thesis
    return skillfiles.select(skills, hardware=run.hardware, model=thesis.model or None, target=thesis.target.name)


def _recent_results(run: Run) -> str:
    rows = []
    for c in run.candidates.exclude(status__in=[Candidate.Status.PROPOSED, Candidate.Status.QUEUED,
                                                Candidate.Status.RUNNING]).order_by("-number")[:RECENT_RESULTS]:
        speed = ""
        evaluation = c.evaluations.order_by("-attempt").first()
        if evaluation is not None and evaluation.geomean_speedup:
            speed = f", {evaluation.geomean_speedup:.3f}x the incumbent"
        rows.append(f"- candidate {c.number} ({c.proposer}): {c.status}, {c.reason_code or '-'}{speed}: "
                    f"{c.reason_text or ''}".strip())
    return "\n".join(reversed(rows)) or "(none yet)"


def _where_time_goes(incumbent: Candidate | None) -> str | None:
    """The incumbent's latest report, read for where its time goes (loop/where_time.py)."""
    evaluation = incumbent.evaluations.order_by("-attempt").first() if incumbent else None
    section = where_time.prompt_section(evaluation.report) if evaluation is not None else None
    return (f"## Where the incumbent's time goes (its latest report; start from the bottleneck)\n\n{section}"
            if section else None)


def build_messages(run: Run) -> tuple[list[dict], list[str]]:
    """The exact chat messages sent, and the keys of the skills they include."""
    thesis, target = run.thesis, run.thesis.target
    selected = skills_for(run)
    incumbent = run.incumbent
    base_source = incumbent.source if incumbent else (run.proposer_settings.get("seed_source")
                                                      or target_seed_source(target) or "")
    base_label = (f"The incumbent (candidate {incumbent.number}, the one to beat)" if incumbent
                  else "The seed candidate (the incumbent is the default kernel)")
    contract = target_contract(target)
    user = "\n\n".join(part for part in [
        f"# Thesis: {thesis.title}\n\n{thesis.body.strip()}",
        f"## Constraints (what may not change)\n\n{thesis.constraints.strip() or '(none stated)'}",
        f"## Target contract: {target.name} on {run.hardware}\n\n" + "\n".join(
            f"- {key}: {value}" for key, value in contract.items() if key != "seed_candidates"),
        f"## {base_label}\n\n```python\n{base_source.rstrip()}\n```",
        f"## Results so far (most recent last)\n\n{_recent_results(run)}",
        _where_time_goes(incumbent),
        f"## Forbidden shortcuts\n\n{FORBIDDEN_SHORTCUTS}",
        "Write the next candidate: one complete file in one ```python block.",
    ] if part)
    system = SYSTEM + ("\n\n" + skillfiles.render_context(selected) if selected else "")
    return [{"role": "system", "content": system}, {"role": "user", "content": user}], [s.key for s in selected]


def parse_answer(text: str) -> str | None:
    """The one source file in an answer: the fenced python block that defines forward (else the first)."""
    blocks = [b for b in _FENCE.findall(text or "") if b.strip()]
    if not blocks:
        return None
    with_forward = [b for b in blocks if re.search(r"^def forward\(", b, re.MULTILINE)]
    return (with_forward or blocks)[0].rstrip() + "\n"


def _redact(text: str) -> str:
    for key in api_keys():
        text = text.replace(key, "[redacted]")
    return text


def propose(run: Run) -> Candidate | None:
    from openai import DefaultHttpxClient, OpenAI  # local: only an LLM run needs the client; slow to import

    try:
        conf = endpoint(run)
    except ValidationError as error:
        reason = _redact(" ".join(error.messages))
        log.warning("run %s: %s", run.pk, reason)
        run_hold(run=run, reason=reason)
        return None
    messages, skill_keys = build_messages(run)
    proposal = {"kind": "llm", "endpoint": conf["endpoint"].name, "base_url": conf["base_url"],
                "model": conf["model"], "messages": messages, "skills": skill_keys}
    # The key of this endpoint only, to this endpoint's URL only: a redirect is an error, never followed.
    client = OpenAI(base_url=conf["base_url"], api_key=conf["endpoint"].key() or "not-set",
                    timeout=conf["timeout_s"], max_retries=1,
                    http_client=DefaultHttpxClient(follow_redirects=False))
    started = time.monotonic()
    try:
        response = client.chat.completions.create(model=conf["model"], messages=messages,
                                                  temperature=conf["temperature"], max_tokens=conf["max_tokens"])
        answer = (response.choices[0].message.content or "") if response.choices else ""
    except Exception as exc:  # noqa: BLE001 (any endpoint failure is a recorded, rejected proposal)
        proposal["latency_ms"] = round((time.monotonic() - started) * 1000)
        reason = _redact(f"the LLM endpoint failed: {type(exc).__name__}: {exc}")[:500]
        log.warning("run %s: %s", run.pk, reason)
        return candidate_record_rejected_proposal(run=run, proposer=PROPOSER, proposal=proposal, reason=reason)
    usage = getattr(response, "usage", None)
    proposal.update({
        "latency_ms": round((time.monotonic() - started) * 1000),
        "tokens": {"prompt": getattr(usage, "prompt_tokens", None), "completion": getattr(usage, "completion_tokens", None),
                   "total": getattr(usage, "total_tokens", None)},
        "answer": _redact(answer)[:MAX_ANSWER_CHARS],
        "response_model": getattr(response, "model", None),
    })
    source = parse_answer(answer)
    if source is None:
        return candidate_record_rejected_proposal(run=run, proposer=PROPOSER, proposal=proposal,
                                                  reason="the answer has no fenced python block")
    parent = run.incumbent
    try:
        return candidate_submit(run=run, source=source, proposer=PROPOSER, parent=parent, proposal=proposal)
    except CandidateRejected as exc:
        return candidate_record_rejected_proposal(run=run, proposer=PROPOSER, source=source, proposal=proposal,
                                                  reason="; ".join(exc.problems))
