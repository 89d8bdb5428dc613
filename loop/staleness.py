"""Stale verdicts: what a candidate awaiting review was measured against, and whether that is still what it
would replace (docs/domain.md, Stale verdicts). Reads only.

A candidate's speedup is a comparison with the run's incumbent at dispatch (`Candidate.measured_against`,
null for the default kernel) while the serving config of its target and hardware stood at
`measured_config_version`. When either has moved on since, "faster" is a claim about a kernel nobody
would be replacing: the pages say so, and approving it asks for confirmation.
"""

from __future__ import annotations

from dataclasses import dataclass

from loop.models import Candidate, ServingConfig


@dataclass(frozen=True)
class Staleness:
    """How a candidate's comparison is out of date; `text` is the sentence pages show."""

    incumbent_then: int | None          # candidate number, None for the default kernel
    incumbent_now: int | None
    incumbent_now_id: int | None
    config_then: int | None             # serving config version, None when none existed
    config_now: int | None

    @property
    def incumbent_moved(self) -> bool:
        return self.incumbent_then != self.incumbent_now

    @property
    def text(self) -> str:
        parts = []
        if self.incumbent_moved:
            then = f"#{self.incumbent_then}" if self.incumbent_then is not None else "the default kernel"
            now = f"#{self.incumbent_now}" if self.incumbent_now is not None else "the default kernel"
            parts.append(f"measured against {then}, superseded by {now}")
        if self.config_then != self.config_now:
            then = f"v{self.config_then}" if self.config_then is not None else "no serving config"
            parts.append(f"serving config was {then}, now v{self.config_now}")
        return "; ".join(parts)

    def to_json(self) -> dict:
        return {"incumbent_then": self.incumbent_then, "incumbent_now": self.incumbent_now,
                "config_then": self.config_then, "config_now": self.config_now, "text": self.text}


def serving_version(target_id: int, hardware: str) -> int | None:
    """The version of the serving config in force for a target on a hardware kind, None when none exists."""
    return (ServingConfig.objects.filter(target_id=target_id, hardware=hardware)
            .order_by("-version").values_list("version", flat=True).first())


def _number(candidate_id: int | None) -> int | None:
    if candidate_id is None:
        return None
    return Candidate.objects.filter(pk=candidate_id).values_list("number", flat=True).first()


def _against(candidate: Candidate) -> int | None:
    if candidate.measured_against_id is None and candidate.measured_config_version is None:
        # dispatched before these fields existed: the proposal's note of the incumbent, if any
        return (candidate.proposal or {}).get("measured_against")
    return candidate.measured_against_id


def candidate_staleness(candidate: Candidate, *, config_now: int | None = None,
                        config_known: bool = False) -> Staleness | None:
    """None unless the candidate awaits review and what it was measured against has been superseded.
    `config_now` may be passed in (with config_known=True) when a page checks many candidates of one run."""
    if candidate.status != Candidate.Status.AWAITING_REVIEW:
        return None
    run = candidate.run
    against = _against(candidate)
    if not config_known:
        config_now = serving_version(run.thesis.target_id, run.hardware)
    incumbent_moved = against != run.incumbent_id
    config_moved = candidate.measured_config_version != config_now
    if not incumbent_moved and not config_moved:
        return None
    incumbent_now = run.incumbent.number if run.incumbent_id else None
    return Staleness(incumbent_then=_number(against), incumbent_now=incumbent_now, incumbent_now_id=run.incumbent_id,
                     config_then=candidate.measured_config_version, config_now=config_now)


def measured_against_text(candidate: Candidate) -> str:
    """What the candidate's last dispatch compared it with, in words ("" before any dispatch)."""
    if candidate.attempt == 0 or (candidate.proposal or {}).get("kind") == "import":
        return ""  # never dispatched, or measured elsewhere against what its report says
    number = _number(_against(candidate))
    text = f"measured against candidate #{number}" if number is not None else "measured against the default kernel"
    if candidate.measured_config_version is not None:
        text += f", serving config v{candidate.measured_config_version}"
    return text


def run_staleness(run, candidates) -> dict[int, Staleness]:
    """{candidate pk: Staleness} for the stale ones among a run's candidates (one config query for all, none
    when no candidate awaits review: only those can be stale)."""
    awaiting = [c for c in candidates if c.status == Candidate.Status.AWAITING_REVIEW]
    if not awaiting:
        return {}
    config_now = serving_version(run.thesis.target_id, run.hardware)
    stale = {}
    for candidate in awaiting:
        candidate.run = run
        found = candidate_staleness(candidate, config_now=config_now, config_known=True)
        if found is not None:
            stale[candidate.pk] = found
    return stale
