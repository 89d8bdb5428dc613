"""`python -m gpu_worker.fib read|export|promote|retime`: JSON on stdin, one JSON object on stdout. The web side calls
this in a child process, since FlashInfer-Bench imports torch and the console and loop never do
(docs/interop.md)."""

import json
import sys


def main(argv: list[str]) -> int:
    command = argv[0] if argv else ""
    payload = json.loads(sys.stdin.read() or "{}")
    # local: each command loads only what it needs (read and export need no GPU, retime no package readers)
    from .document import DocumentError

    try:
        if command == "read":
            from .reader import build_document, captured_inputs  # local: see above
            result = {"document": build_document(payload["definition"], payload.get("workloads") or "",
                                                 payload.get("ranges"), payload.get("tolerance"),
                                                 payload.get("inputs"), payload.get("check")),
                      "captured": captured_inputs(payload["definition"], payload.get("workloads") or "")}
        elif command == "export":
            from .traceset import export_traceset  # local: see above
            result = export_traceset(payload, payload["out"])
        elif command == "promote":
            from .traceset import promotion_traceset  # local: see above
            result = promotion_traceset(payload, payload["out"])
        elif command == "retime":
            from .retime import retime  # local: see above
            result = retime(payload)
        else:
            print(json.dumps({"ok": False, "error": f"unknown command {command!r}: read, export, promote or retime"}))
            return 2
    except (DocumentError, ValueError, KeyError) as exc:
        print(json.dumps({"ok": False, "error": str(exc)}))
        return 1
    print(json.dumps({"ok": True, **result}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
