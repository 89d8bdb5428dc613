"""The parent's judgement of verification outputs: inputs regenerated from the secret seed, the
reference computed here (never in the candidate's process), the target's check applied to what
the child saved. Loading uses torch.load(weights_only=True): the files are untrusted.

RUNS is the plan both sides share: every way the child runs the candidate on one shape, the input
set that run used, and the finding it earns when its output is wrong. The parent judges every run
of the plan, whatever the child says it saved, so a run that is skipped is a missing output."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import torch

from .protocol import derive_seed


class Run(NamedTuple):
    tag: str          # the file is verify_<shape index>_<tag>.pt
    input_set: int    # derive_seed(seed, "verify", shape index, input_set) made its inputs
    code: str         # the finding when this run's output is wrong and the first run's is right
    what: str         # how the run differs from the first, for the message
    where: str        # "all", "cuda" (needs a GPU) or "first" (the first shape only)


RUNS = (
    Run("first", 0, "verify:wrong", "the first call", "all"),
    Run("moved", 0, "verify:new_buffers", "the same values in newly allocated input tensors", "all"),
    Run("refresh", 1, "verify:stale_result", "new values written into the first call's input tensors", "all"),
    Run("later", 2, "verify:call_count", "a later call, after a burst of calls on fresh inputs", "first"),
    Run("stream", 0, "verify:side_stream", "the first call's values in new tensors, on a side stream", "cuda"),
    Run("replay", 0, "verify:graph_replay", "a replay of that call captured in a CUDA graph", "cuda"),
    Run("replay_fresh", 3, "verify:graph_replay",
        "a replay after new values were copied into the captured input tensors", "cuda"),
)


def runs_for(index: int, device: str, first_call_only: bool = False) -> list[Run]:
    """The runs the child makes, and the parent judges, for shape `index`; `first_call_only` (a CPU host's
    costliest shapes, TargetSpec.cpu_first_call_only): the first call alone."""
    if first_call_only:
        return [RUNS[0]]
    return [r for r in RUNS if r.where == "all" or (r.where == "cuda" and device == "cuda")
            or (r.where == "first" and index == 0)]


def file_name(index: int, tag: str) -> str:
    return f"verify_{index}_{tag}.pt"


def _load(path: Path, device: str):
    tensors = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(tensors, list) or not all(type(t) is torch.Tensor for t in tensors):
        raise ValueError("saved outputs are not a list of plain tensors")
    tensors = [t.to(device) for t in tensors]
    return tensors[0] if len(tensors) == 1 else tuple(tensors)


def _missing(name: str, why: str) -> dict:
    return {"pass": False, "max_error": None, "message": f"{why}: {name}",
            "findings": [{"code": "verify:missing_output", "message": f"{why}: {name}"}]}


def judge(target, shape: dict, index: int, seed: int, outputs_dir: Path, files: list[str], device: str) -> dict:
    """{pass, max_error, message, findings} for one verification shape: every run of runs_for(index,
    device) is judged against the reference of the input set it was given. `files` is what the child
    says it saved; the plan, not that list, decides what is judged."""
    results = []  # (run, output, ok, error, message)
    refs: dict[int, tuple] = {}  # input set -> (inputs, reference): runs on set 0 share one
    for run in runs_for(index, device, target.first_call_only(shape, device)):
        name = file_name(index, run.tag)
        path = outputs_dir / name
        if path.parent != outputs_dir or not path.is_file():
            return _missing(name, "no output file for " + run.what)
        try:
            output = _load(path, device)
        except Exception as e:
            return _missing(name, f"unreadable outputs ({str(e)[:300]})")
        if run.input_set not in refs:
            inputs = target.make_inputs(shape, derive_seed(seed, "verify", index, run.input_set), device)
            refs[run.input_set] = (inputs, target.reference(inputs))
        inputs, ref = refs[run.input_set]
        ok, err, msg = target.check(output, inputs, ref)
        results.append((run, output, ok, err, msg))
    del refs
    findings = [f for f in (_finding(target, results, i) for i in range(len(results))) if f]
    if findings and not results[0][2]:
        findings = findings[:1]  # wrong from the first call: the other runs add nothing
    errors = [r[3] for r in results if r[3] == r[3]]  # NaN errors say nothing about size
    return {"pass": all(r[2] for r in results), "max_error": max(errors) if errors else None,
            "message": findings[0]["message"] if findings else results[0][4], "findings": findings}


def _finding(target, results, i: int) -> dict | None:
    """The finding for run i, or None when it is right. A run's own code names the condition that
    changed the answer, so it is given only when that condition is the one difference: the run saw
    the first call's values (which were answered right), or it returned an earlier run's answer to
    other inputs (a stale answer). Any other wrong answer is verify:wrong, and the message says
    which run produced it."""
    run, output, ok, _, msg = results[i]
    if ok:
        return None
    if "NaN" in msg:
        return {"code": "verify:nan", "message": f"on {run.what}: {msg}"}
    if i == 0:
        return {"code": run.code, "message": msg}
    if run.input_set == 0 and results[0][2]:
        return {"code": run.code, "message": f"right on the first call, wrong on {run.what}: {msg}"}
    for earlier in results[:i]:
        if earlier[0].input_set != run.input_set and _same_answer(target, output, earlier[1]):
            return {"code": run.code, "message": f"on {run.what}: the answer given to {earlier[0].what} "
                                                 f"(other inputs), a stale result: {msg}"}
    return {"code": "verify:wrong", "message": f"on {run.what}: {msg}"}


def _same_answer(target, a, b) -> bool:
    try:
        ca, cb = target.canonical(a), target.canonical(b)
        return len(ca) == len(cb) and all(x.shape == y.shape and x.dtype == y.dtype and torch.equal(x, y)
                                          for x, y in zip(ca, cb))
    except Exception:
        return False


def judge_replays(target, shapes: list[dict], seed: int, outputs_dir: Path, messages: list[dict],
                  device: str) -> list[dict]:
    """The parent's own judgement of the benchmark's saved replay outputs: each saved set's inputs are
    regenerated here from the seed (the child's claim that it checked them is not taken on trust).
    `shapes` are the timed shapes in message order (listed, then held out). Returns findings."""
    from .bench_child import set_inputs  # the bench child's own definition of set j, so both draw the same

    findings = []
    for m in messages:
        if m.get("type") != "bench_shape" or not m.get("saved"):
            continue
        index = m["index"]
        if not 0 <= index < len(shapes):
            findings.append({"code": "bench:wrong_output", "message": f"a saved replay names shape {index}"})
            continue
        for item in m["saved"]:
            path = outputs_dir / str(item.get("file"))
            if path.parent != outputs_dir or not path.is_file():
                findings.append({"code": "bench:wrong_output", "message": f"saved replay {item.get('file')} missing"})
                continue
            try:
                output = _load(path, device)
                inputs = set_inputs(target, shapes[index], seed, index, int(item["set"]), device)
                ok, _, msg = target.check(output, inputs, target.reference(inputs))
            except Exception as e:  # unreadable or malformed: the child's file, not the harness
                ok, msg = False, f"unreadable saved replay: {str(e)[:300]}"
            if not ok:
                findings.append({"code": "bench:wrong_output", "shape_index": index,
                                 "message": f"the referee's check of timed replay {item.get('set')}: {msg[:500]}"})
    return findings
