"""The parent's judgement of verification outputs: inputs regenerated from the secret seed, the
reference computed here (never in the candidate's process), the target's check applied to what
the child saved. Loading uses torch.load(weights_only=True): the files are untrusted."""

from __future__ import annotations

from pathlib import Path

import torch

from .protocol import derive_seed


def _load(path: Path, device: str):
    tensors = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(tensors, list) or not all(type(t) is torch.Tensor for t in tensors):
        raise ValueError("saved outputs are not a list of plain tensors")
    tensors = [t.to(device) for t in tensors]
    return tensors[0] if len(tensors) == 1 else tuple(tensors)


def judge(target, shape: dict, index: int, seed: int, outputs_dir: Path, files: list[str], device: str) -> dict:
    """{pass, max_error, message, findings} for one verification shape."""
    results = []
    for which, name in zip((0, 1), files):
        path = outputs_dir / name
        if path.parent != outputs_dir or not path.is_file():
            return {"pass": False, "max_error": None, "message": f"missing output file {name}",
                    "findings": [{"code": "verify:missing_output", "message": f"no {name}"}]}
        try:
            output = _load(path, device)
        except Exception as e:
            return {"pass": False, "max_error": None, "message": f"unreadable outputs: {e}",
                    "findings": [{"code": "verify:missing_output", "message": str(e)[:500]}]}
        inputs = target.make_inputs(shape, derive_seed(seed, "verify", index, which), device)
        ref = target.reference(inputs)
        results.append(target.check(output, inputs, ref))
        del inputs, ref, output
    (ok1, err1, msg1), (ok3, err3, msg3) = results
    findings = []
    if not ok1:
        code = "verify:nan" if "NaN" in msg1 else "verify:wrong"
        findings.append({"code": code, "message": msg1})
    elif not ok3:
        code = "verify:nan" if "NaN" in msg3 else "verify:stale_result"
        findings.append({"code": code, "message": f"after the inputs were refreshed in place: {msg3}"})
    max_error = max(err1, err3)
    return {"pass": ok1 and ok3, "max_error": max_error if max_error == max_error else None,
            "message": msg1 if not ok1 else msg3, "findings": findings}
