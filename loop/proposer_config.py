"""What a run may say about its proposer, and the LLM endpoints the server is configured with.

A run's `proposer_settings` come from a person, so they are checked against a strict schema for the
run's proposer: unknown keys are refused by name, values by type and range, and the whole is limited in
size and nesting depth. LLM endpoints are server configuration (ARK_LLM_ENDPOINTS): a name, a URL, the
name of the environment variable that holds the key, and the models a run may ask for. A run picks an
endpoint by name; the key is sent only to that endpoint's URL (docs/security.md).

`llm_preflight` checks an endpoint before a run starts and before every proposal: configured, key
present, reachable, model listed by its /models. Its errors name the URL, the missing setting and what
the endpoint answered, and no candidate is spent on them.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ValidationError

MAX_SETTINGS_BYTES = 256 * 1024
MAX_DEPTH = 8
MAX_SOURCE_CHARS = 200_000
PREFLIGHT_TIMEOUT_S = 10.0


def _text(limit):
    def check(value):
        if not isinstance(value, str) or len(value) > limit:
            raise ValueError(f"text of at most {limit} characters")
        return value
    return check


def _number(kind, lo, hi):
    def check(value):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and value != int(value)):
            raise ValueError(f"a{'' if kind is float else ' whole'} number from {lo} to {hi}")
        if not lo <= value <= hi:
            raise ValueError(f"from {lo} to {hi}")
        return kind(value)
    return check


SEED = {"seed_source": _text(MAX_SOURCE_CHARS)}
SCHEMAS = {
    "sweep": SEED,
    "human": SEED,
    "llm": {**SEED, "endpoint": _text(64), "model": _text(200), "temperature": _number(float, 0.0, 2.0),
            "max_tokens": _number(int, 1, 200_000), "timeout_s": _number(float, 1.0, 600.0)},
}


def json_depth(value, limit: int = MAX_DEPTH) -> int:
    """The nesting depth of decoded JSON, iteratively (a 5000-deep value is no RecursionError here)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def json_object_parse(text: str) -> dict:
    """A JSON object from a person, within the size and depth limits; ValueError says what is wrong."""
    if len(text.encode()) > MAX_SETTINGS_BYTES:
        raise ValueError(f"too large: at most {MAX_SETTINGS_BYTES // 1024} KB of JSON")
    if text.count("[") + text.count("{") > 10_000:
        raise ValueError("too many nested objects or lists")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"not valid JSON: {error.msg} (line {error.lineno})") from error
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels") from None
    if not isinstance(value, dict):
        raise ValueError('give a JSON object, e.g. {"seed_source": "..."}')
    if json_depth(value) > MAX_DEPTH:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
    return value


def proposer_settings_clean(proposer: str, value) -> dict:
    """The settings a run of `proposer` may carry, checked key by key; a ValidationError names each problem."""
    value = value or {}
    if not isinstance(value, dict) or json_depth(value) > MAX_DEPTH:
        raise ValidationError(f"proposer settings must be a JSON object nested at most {MAX_DEPTH} levels")
    if len(json.dumps(value, default=str)) > MAX_SETTINGS_BYTES:
        raise ValidationError(f"proposer settings are limited to {MAX_SETTINGS_BYTES // 1024} KB")
    schema = SCHEMAS.get(proposer, {})
    problems, clean = [], {}
    for key, item in value.items():
        if key not in schema:
            allowed = ", ".join(sorted(schema)) or "none"
            hint = " (API keys and URLs are server configuration: ARK_LLM_ENDPOINTS)" if proposer == "llm" else ""
            problems.append(f"unknown setting {str(key)[:40]!r} for the {proposer} proposer; allowed: {allowed}{hint}")
            continue
        try:
            clean[key] = schema[key](item)
        except ValueError as error:
            problems.append(f"{key}: {error}")
    if problems:
        raise ValidationError(problems)
    return clean


@dataclass(frozen=True)
class Endpoint:
    name: str
    url: str
    key_env: str  # "" for an endpoint that takes no key (a local vLLM, say)
    models: tuple[str, ...]

    def key(self) -> str | None:
        return os.environ.get(self.key_env) if self.key_env else None


def llm_endpoints() -> dict[str, Endpoint]:
    """ARK_LLM_ENDPOINTS, else one endpoint "default" from ARK_LLM_BASE_URL / ARK_LLM_MODEL / ARK_LLM_API_KEY."""
    raw = getattr(settings, "ARK_LLM_ENDPOINTS", None) or {}
    if not raw and getattr(settings, "ARK_LLM_BASE_URL", ""):
        model = getattr(settings, "ARK_LLM_MODEL", "")
        raw = {"default": {"url": settings.ARK_LLM_BASE_URL, "key_env": "ARK_LLM_API_KEY",
                           "models": [model] if model else []}}
    endpoints = {}
    for name, conf in raw.items():
        conf = conf if isinstance(conf, dict) else {}
        endpoints[name] = Endpoint(name=name, url=str(conf.get("url", "")).rstrip("/"),
                                   key_env=str(conf.get("key_env", "")),
                                   models=tuple(str(m) for m in conf.get("models", []) or []))
    return endpoints


def llm_endpoint_resolve(conf: dict) -> tuple[Endpoint, str]:
    """The configured endpoint and model a run's settings pick, or a ValidationError saying what to set."""
    endpoints = llm_endpoints()
    name = conf.get("endpoint")
    if not endpoints:
        raise ValidationError("No LLM endpoint is configured: set ARK_LLM_ENDPOINTS (JSON: {\"name\": {\"url\": "
                              "..., \"key_env\": ..., \"models\": [...]}}) or ARK_LLM_BASE_URL and ARK_LLM_MODEL "
                              "in the server's environment.")
    if name is None:
        if len(endpoints) > 1:
            raise ValidationError(f"Several LLM endpoints are configured: name one in the settings as "
                                  f"\"endpoint\" ({', '.join(sorted(endpoints))}).")
        name = next(iter(endpoints))
    if name not in endpoints:
        raise ValidationError(f"Unknown LLM endpoint {name!r}; configured: {', '.join(sorted(endpoints))}.")
    endpoint = endpoints[name]
    if not endpoint.url.startswith(("http://", "https://")):
        raise ValidationError(f"LLM endpoint {name!r} has no http(s) url in ARK_LLM_ENDPOINTS.")
    if not endpoint.models:
        raise ValidationError(f"LLM endpoint {name!r} ({endpoint.url}) allows no model: list them under "
                              f"\"models\" in ARK_LLM_ENDPOINTS (or set ARK_LLM_MODEL).")
    model = conf.get("model") or endpoint.models[0]
    if model not in endpoint.models:
        raise ValidationError(f"Model {model!r} is not allowed on LLM endpoint {name!r}; allowed: "
                              f"{', '.join(endpoint.models)}.")
    return endpoint, model


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None  # a redirect is an answer to report, never a place to send the key


def llm_preflight(conf: dict) -> tuple[Endpoint, str]:
    """Resolve the endpoint, then ask its /models with the key: a ValidationError says what is wrong."""
    endpoint, model = llm_endpoint_resolve(conf)
    key = endpoint.key()
    if endpoint.key_env and not key:
        raise ValidationError(f"The key for LLM endpoint {endpoint.name!r} ({endpoint.url}) is missing: the "
                              f"environment variable {endpoint.key_env} is not set for the console and loop worker.")
    url = f"{endpoint.url}/models"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.build_opener(_NoRedirect).open(request, timeout=PREFLIGHT_TIMEOUT_S) as response:
            body = response.read(1_000_000)
    except urllib.error.HTTPError as error:
        answer = error.read(300).decode(errors="replace").strip()
        answer = answer.replace(key, "[redacted]") if key else answer
        raise ValidationError(f"LLM endpoint {endpoint.name!r}: GET {url} answered HTTP {error.code}"
                              f"{': ' + answer if answer else ''}"
                              f"{' (check ' + endpoint.key_env + ')' if error.code in (401, 403) else ''}.") from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise ValidationError(f"LLM endpoint {endpoint.name!r}: could not reach {url}: {reason}.") from None
    try:
        listed = [m.get("id") for m in json.loads(body).get("data", []) if isinstance(m, dict)]
    except (ValueError, AttributeError):
        raise ValidationError(f"LLM endpoint {endpoint.name!r}: GET {url} did not answer an OpenAI model "
                              f"list: {body[:200].decode(errors='replace')!r}.") from None
    if model not in listed:
        raise ValidationError(f"LLM endpoint {endpoint.name!r} ({endpoint.url}) does not serve model {model!r}; "
                              f"its /models lists: {', '.join(map(str, listed[:20])) or 'nothing'}.")
    return endpoint, model
