"""Skill files: markdown context shipped in skills/, parsed, selected and exported.

A skill file starts with YAML front matter between two `---` lines:

    ---
    title: TMA, mbarriers and clusters on sm_90
    applies_to: {hardware: [h200, h100], models: [any], targets: [any]}
    kind: hardware
    sources: ["NVIDIA Hopper tuning guide"]
    ---
    markdown body

Pure Python (no Django), so the console can import skills into the database and export them
back, and the proposer can build a prompt, from the same code.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import yaml

ANY = "any"
KINDS = ("rules", "hardware", "model")
APPLIES_TO_AXES = ("hardware", "models", "targets")
_FENCE = "---"
# Order of a prompt: the rules bind everything, then the machine, then the model, then the op.
_SECTION_RANK = {"rules": 0, "hardware": 1, "model": 2}
_TARGET_SPECIFIC_RANK = 3


@dataclass(frozen=True)
class SkillFile:
    key: str
    meta: dict
    body: str
    text: str

    @property
    def title(self) -> str:
        return self.meta["title"]

    @property
    def kind(self) -> str:
        return self.meta["kind"]


def validate_key(key: str) -> PurePosixPath:
    """Return `key` as a relative POSIX path, or raise ValueError if it could leave its root."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"skill key {key!r}: must be a non-empty string")
    if "\\" in key or "\x00" in key:
        raise ValueError(f"skill key {key!r}: backslashes and NUL are not allowed")
    path = PurePosixPath(key)
    if path.is_absolute() or (len(key) > 1 and key[1] == ":"):
        raise ValueError(f"skill key {key!r}: must be relative to the skills root")
    parts = key.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise ValueError(f"skill key {key!r}: empty, '.' or '..' path parts are not allowed")
    return path


def _split_front_matter(key: str, text: str) -> tuple[str, str]:
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n") != _FENCE:
        raise ValueError(f"{key}: missing front matter (the file must start with a '---' line)")
    for index in range(1, len(lines)):
        if lines[index].rstrip("\r\n") == _FENCE:
            return "".join(lines[1:index]), "".join(lines[index + 1 :])
    raise ValueError(f"{key}: front matter is not closed (no second '---' line)")


def _check_string_list(key: str, field: str, value: object) -> None:
    if not isinstance(value, list) or not value:
        raise ValueError(f"{key}: {field} must be a non-empty list, got {value!r}")
    for item in value:
        if not isinstance(item, str) or not item.strip():
            raise ValueError(f"{key}: {field} must hold non-empty strings, got {item!r}")


def _check_meta(key: str, meta: object) -> dict:
    # Every malformed file is a ValueError, whatever is wrong with it: callers catch one type.
    if not isinstance(meta, dict):
        message = f"{key}: front matter must be a YAML mapping, got {type(meta).__name__}"
        raise ValueError(message)  # noqa: TRY004
    title = meta.get("title")
    if not isinstance(title, str) or not title.strip():
        raise ValueError(f"{key}: front matter needs a non-empty 'title'")
    if meta.get("kind") not in KINDS:
        raise ValueError(f"{key}: 'kind' must be one of {', '.join(KINDS)}, got {meta.get('kind')!r}")
    applies_to = meta.get("applies_to")
    if not isinstance(applies_to, dict):
        axes = ", ".join(APPLIES_TO_AXES)
        message = f"{key}: 'applies_to' must be a mapping with {axes}, got {applies_to!r}"
        raise ValueError(message)  # noqa: TRY004
    unknown = sorted(set(applies_to) - set(APPLIES_TO_AXES))
    if unknown:
        raise ValueError(f"{key}: 'applies_to' has unknown axes {unknown}")
    for axis in APPLIES_TO_AXES:
        if axis not in applies_to:
            raise ValueError(f"{key}: 'applies_to' is missing '{axis}' (use [any] for all)")
        _check_string_list(key, f"applies_to.{axis}", applies_to[axis])
    _check_string_list(key, "sources", meta.get("sources"))
    return meta


def parse(key: str, text: str) -> SkillFile:
    """Parse one skill file; ValueError names the file when its front matter is missing or malformed."""
    front, body = _split_front_matter(key, text)
    try:
        meta = yaml.safe_load(front)
    except yaml.YAMLError as error:
        raise ValueError(f"{key}: front matter is not valid YAML: {error}") from error
    return SkillFile(key=key, meta=_check_meta(key, meta), body=body, text=text)


def load_tree(root: Path) -> list[SkillFile]:
    """Every `*.md` under `root`, parsed, sorted by key."""
    root = Path(root)
    skills = []
    for path in root.rglob("*.md"):
        if not path.is_file():
            continue
        key = path.relative_to(root).as_posix()
        # Bytes then decode: no newline translation, so export can reproduce the file exactly.
        skills.append(parse(key, path.read_bytes().decode("utf-8")))
    return sorted(skills, key=lambda skill: skill.key)


def _matches(declared: list[str], wanted: str | None) -> bool:
    return ANY in declared or (wanted is not None and wanted in declared)


def applies(meta: dict, *, hardware: str | None, model: str | None, target: str | None) -> bool:
    """Rules apply everywhere; otherwise every axis must say "any" or name the wanted value."""
    if meta["kind"] == "rules":
        return True
    applies_to = meta["applies_to"]
    return (
        _matches(applies_to["hardware"], hardware)
        and _matches(applies_to["models"], model)
        and _matches(applies_to["targets"], target)
    )


def _rank(skill: SkillFile) -> int:
    if skill.kind != "rules" and ANY not in skill.meta["applies_to"]["targets"]:
        return _TARGET_SPECIFIC_RANK
    return _SECTION_RANK[skill.kind]


def select(
    skills: Iterable[SkillFile], *, hardware: str | None, model: str | None, target: str | None
) -> list[SkillFile]:
    """The skills that apply: rules first, then hardware, model, and target-specific ones."""
    chosen = [s for s in skills if applies(s.meta, hardware=hardware, model=model, target=target)]
    return sorted(chosen, key=lambda skill: (_rank(skill), skill.key))


def render_context(selected: Iterable[SkillFile]) -> str:
    """One text block for a prompt: each skill under a heading with its key, front matter left out."""
    blocks = []
    for skill in selected:
        sources = "; ".join(skill.meta["sources"])
        blocks.append(
            f"# skills/{skill.key}: {skill.title}\n\n{skill.body.strip()}\n\n(Sources: {sources})\n"
        )
    return "\n".join(blocks)


def export_tree(items: Iterable[tuple[str, str]], root: Path) -> list[Path]:
    """Write each (key, text) under `root` byte for byte; refuse every key before writing any."""
    root = Path(root)
    pending = [(validate_key(key), text) for key, text in items]
    written = []
    for relative, text in pending:
        path = root.joinpath(*relative.parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        # A symlinked folder inside the root must not carry a write outside it.
        if not path.resolve().is_relative_to(root.resolve()):
            raise ValueError(f"skill key {relative.as_posix()!r}: resolves outside {root}")
        path.write_bytes(text.encode("utf-8"))
        written.append(path)
    return written
