"""What parent and child say to each other: one JSON object per line on a pipe the parent owns."""

from __future__ import annotations

import hashlib
import json
import os
import re
from functools import lru_cache

import torch

MAX_MESSAGE_BYTES = 4 << 20
CANDIDATE_TEXT_CHARS = 1500  # what a finding keeps of text the candidate's process produced
CANDIDATE_MARK = "[candidate text, not written by the harness]"
# A line of /etc/shadow (name:hash:7 numeric or empty fields) and a crypt(3) hash anywhere.
_SHADOW_LINE = re.compile(r"[^:\s]+:[^:\s]*:\d*:\d*:\d*:\d*:\d*:\d*:[^\n]*")
_CRYPT_HASH = re.compile(r"\$(?:1|2[abxy]|5|6|y|gy|7|sha1|md5)\$[./A-Za-z0-9$]{8,}")
_SECRET_NAME = re.compile(r"KEY|SECRET|TOKEN|PASS|CREDENTIAL|AUTH|COOKIE|SESSION|_URL$|DSN", re.I)  # not PWD: a directory


def derive_seed(seed: int, *parts) -> int:
    """A 63-bit seed for one (shape, input set): independent streams from one secret."""
    h = hashlib.sha256(repr((int(seed),) + tuple(parts)).encode()).digest()
    return int.from_bytes(h[:8], "little") & 0x7FFF_FFFF_FFFF_FFFF


@lru_cache(maxsize=1)
def _worker_secrets() -> tuple[str, ...]:
    """Values of this process's secret-looking environment variables (read once: in the worker they are
    its secrets; in a child, whose environment is a short explicit list, there are none)."""
    return tuple(sorted({v for k, v in os.environ.items() if _SECRET_NAME.search(k) and len(v) >= 6},
                        key=len, reverse=True))


def redact(text: str) -> str:
    """Text with what must never leave the worker replaced: shadow lines, password hashes and the values
    of the worker's secret environment variables."""
    text = _SHADOW_LINE.sub("[redacted: a password-file line]", text)
    text = _CRYPT_HASH.sub("[redacted: a password hash]", text)
    for value in _worker_secrets():
        text = text.replace(value, "[redacted: a worker secret]")
    return text


def candidate_text(text, limit: int = CANDIDATE_TEXT_CHARS) -> str:
    """Text that came out of the candidate's process (an exception message, a traceback, the output
    tail), for a finding: its last `limit` characters, control characters dropped, secrets redacted, and
    marked so no reader takes it for the harness's words."""
    text = redact(str(text)[-8 * limit:])  # redacted whole lines first: a cut could split a secret
    cut = len(text) > limit
    text = text[-limit:] if cut else text
    text = "".join(c if c.isprintable() or c in "\n\t" else "?" for c in text)
    return f"{CANDIDATE_MARK}{' (last ' + str(limit) + ' characters)' if cut else ''}\n{text}"


def sanitize_message(msg: dict, limit: int = 4000) -> dict:
    """Parent side, for every message a child sent: each finding's text (and a fatal's) is redacted and
    cut, since anything on the pipe may have been written by the candidate instead of the harness."""
    def clean(text: str) -> str:
        return redact(text[-2 * limit:])[-limit:]  # redacted before the cut, which could split a secret

    for f in msg.get("findings") or []:
        if isinstance(f, dict) and isinstance(f.get("message"), str):
            f["message"] = clean(f["message"])
    if isinstance(msg.get("message"), str):
        msg["message"] = clean(msg["message"])
    return msg


class Writer:
    """Child side: write-only end of the result pipe."""

    def __init__(self, fd: int):
        self.fd = fd

    def send(self, **message) -> None:
        data = (json.dumps(message, default=str) + "\n").encode()
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]


def tensor_digest(tensors) -> str:
    h = hashlib.sha256()
    for t in tensors:
        t = t.detach().contiguous().cpu()
        h.update(f"{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()
