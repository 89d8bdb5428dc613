"""A parameter sweep with Optuna over the seed candidate's SPACE.

Each candidate is the seed's source with its module-level `PARAMS = {...}` literal rewritten (one
file per candidate). The study lives in the database: every call rebuilds it from the run's
candidates and their results, so a restart loses nothing, and a configuration already tried (or
in flight) is never proposed again. The first proposal is the seed's own defaults.
"""

from __future__ import annotations

import itertools
import json

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState, create_trial

from gpu_worker.candidate_params import read_space, rewrite_params
from loop.models import Candidate, Run
from loop.services.candidates import CandidateRejected, candidate_record_rejected_proposal, candidate_submit
from loop.services.runs import run_mark_exhausted
from loop.services.targets import target_seed_source

optuna.logging.set_verbosity(optuna.logging.WARNING)
PROPOSER = "sweep"
ASKS_BEFORE_ENUMERATING = 20


def _key(params: dict) -> str:
    return json.dumps(params, sort_keys=True, default=repr)


def seed_source(run: Run) -> str | None:
    return run.proposer_settings.get("seed_source") or target_seed_source(run.thesis.target)


def _objective(candidate: Candidate) -> float | None:
    """Time ratio to the incumbent (lower is better), from the candidate's last evaluation."""
    evaluation = candidate.evaluations.order_by("-attempt").first()
    if evaluation is None or not evaluation.geomean_speedup:
        return None
    return 1.0 / evaluation.geomean_speedup


def rebuild_study(run: Run, space: dict, defaults: dict) -> tuple[optuna.Study, set[str]]:
    """The run's study from the database, and the configurations already used."""
    distributions = {name: CategoricalDistribution(choices) for name, choices in space.items()}
    tried: set[str] = set()
    trials = []
    for candidate in run.candidates.order_by("number").prefetch_related("evaluations"):
        params = {**defaults, **(candidate.params or {})}
        tried.add(_key(params))
        swept = {name: params.get(name) for name in space}
        if any(swept[name] not in distributions[name].choices for name in space):
            continue
        if candidate.status not in Candidate.FINAL and candidate.status != Candidate.Status.AWAITING_REVIEW:
            continue
        value = _objective(candidate) if candidate.status != Candidate.Status.ERROR else None
        if value is None:
            trials.append(create_trial(params=swept, distributions=distributions, state=TrialState.FAIL))
        else:
            trials.append(create_trial(params=swept, distributions=distributions, value=value))
    sampler = optuna.samplers.TPESampler(seed=run.pk * 7919 + len(tried), n_startup_trials=5)
    study = optuna.create_study(direction="minimize", sampler=sampler)
    study.add_trials(trials)
    return study, tried


def next_params(run: Run, space: dict, defaults: dict) -> dict | None:
    """An untried configuration: the seed's defaults first, then Optuna's suggestions, then the
    first untried point of the grid; None when every configuration was tried."""
    study, tried = rebuild_study(run, space, defaults)
    if _key(defaults) not in tried:
        return dict(defaults)
    distributions = {name: CategoricalDistribution(choices) for name, choices in space.items()}
    for _ in range(ASKS_BEFORE_ENUMERATING):
        trial = study.ask(distributions)
        params = {**defaults, **trial.params}
        if _key(params) not in tried:
            return params
        study.tell(trial, state=TrialState.FAIL)
    names = list(space)
    for values in itertools.product(*(space[name] for name in names)):
        params = {**defaults, **dict(zip(names, values))}
        if _key(params) not in tried:
            return params
    return None


def propose(run: Run) -> Candidate | None:
    seed = seed_source(run)
    if not seed:
        run_mark_exhausted(run=run, why="the target has no seed candidate to sweep")
        return None
    try:
        defaults, space = read_space(seed)
    except (SyntaxError, ValueError) as exc:
        run_mark_exhausted(run=run, why=f"the seed's PARAMS/SPACE cannot be read: {exc}")
        return None
    if not space:
        run_mark_exhausted(run=run, why="the seed candidate defines no SPACE to sweep")
        return None
    params = next_params(run, space, defaults)
    if params is None:
        run_mark_exhausted(run=run, why="every configuration of the SPACE was tried")
        return None
    source = rewrite_params(seed, params)
    changed = {k: v for k, v in params.items() if defaults.get(k) != v}
    proposal = {"kind": "sweep", "sampler": "optuna.TPESampler", "space": space, "changed": changed}
    parent = run.candidates.filter(number=1).first() if changed else None
    try:
        return candidate_submit(run=run, source=source, proposer=PROPOSER, params=params, parent=parent,
                                proposal=proposal)
    except CandidateRejected as exc:
        if any("budget" in p or "the run is" in p for p in exc.problems):
            return None
        return candidate_record_rejected_proposal(run=run, proposer=PROPOSER, source=source, params=params,
                                                  proposal=proposal, reason="; ".join(exc.problems))
