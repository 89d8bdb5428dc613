"""Hardware kinds: a short slug (h200, b200, cpu, ...) that names a GPU queue (gpu.<kind>), a directory of
serving exports and a skills folder. Every entry point that takes one from a person checks it here once
(docs/security.md): the slug shape always, and for work sent to a queue (a ping) that the kind is
registered, i.e. configured in ARK_HARDWARE_KINDS or announced by a GPU worker's heartbeat."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError

SLUG = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")


def hardware_slug(value) -> str:
    """The kind as a slug, or a ValidationError that says what a kind looks like."""
    kind = value.strip() if isinstance(value, str) else ""
    if not SLUG.fullmatch(kind):
        shown = kind[:40] + ("..." if len(kind) > 40 else "")
        raise ValidationError(f"{shown!r} is not a hardware kind: use lower-case letters, digits, - or _ "
                              f"(at most 32), e.g. h200 or cpu.")
    return kind


def hardware_registered() -> list[str]:
    """The configured kinds and those of every GPU worker that has sent a heartbeat."""
    from loop.models import Worker  # local: settings-only callers need no models

    kinds = set(getattr(settings, "ARK_HARDWARE_KINDS", []))
    kinds.update(Worker.objects.values_list("hardware", flat=True).distinct())
    return sorted(k for k in kinds if SLUG.fullmatch(k))


def hardware_registered_slug(value) -> str:
    kind = hardware_slug(value)
    registered = hardware_registered()
    if kind not in registered:
        raise ValidationError(f"No GPU worker or configuration knows hardware {kind!r}; registered: "
                              f"{', '.join(registered) or 'none'} (ARK_HARDWARE_KINDS adds one).")
    return kind


def path_inside(root: Path, *parts: str) -> Path:
    """root/parts..., refused with a ValueError unless it stays inside root (no .., no absolute part)."""
    base = Path(root).resolve()
    path = base.joinpath(*parts).resolve()
    if not path.is_relative_to(base):
        raise ValueError(f"refused: {'/'.join(parts)!r} leaves {base}")
    return path
