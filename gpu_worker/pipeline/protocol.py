"""What parent and child say to each other: one JSON object per line on a pipe the parent owns."""

from __future__ import annotations

import hashlib
import json
import os

import torch

MAX_MESSAGE_BYTES = 4 << 20


def derive_seed(seed: int, *parts) -> int:
    """A 63-bit seed for one (shape, input set): independent streams from one secret."""
    h = hashlib.sha256(repr((int(seed),) + tuple(parts)).encode()).digest()
    return int.from_bytes(h[:8], "little") & 0x7FFF_FFFF_FFFF_FFFF


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
