import json
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import BaseCommand, CommandError

from loop.services.fib import fib_definition_import


def _read(path: Path | None) -> str:
    if path is None:
        return ""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandError(f"cannot read {path}: {exc}") from exc


class Command(BaseCommand):
    help = ("Import a FlashInfer-Bench Definition (JSON) as a target, with its workloads (JSONL) as the benchmark "
            "grid and workload profile; every var axis needs an operating range (docs/interop.md).")

    def add_arguments(self, parser):
        parser.add_argument("definition", type=Path)
        parser.add_argument("--workloads", type=Path, help="JSONL of workload traces for this definition")
        parser.add_argument("--range", dest="ranges", action="append", default=[], metavar="AXIS=LO:HI",
                            help="operating range of a var axis, inclusive (repeat per axis)")
        parser.add_argument("--atol", type=float, help="per-output absolute tolerance (default 1e-2)")
        parser.add_argument("--rtol", type=float, help="per-output relative tolerance (default 1e-2)")
        parser.add_argument("--inputs", type=Path, help="JSON: generators for inputs the definition cannot describe, "
                            "{\"inputs\": {...}, \"check\": \"<built-in target>\"} (e.g. the definition's .inputs.json)")
        parser.add_argument("--check", help="a built-in target whose check replaces the per-output tolerance")
        parser.add_argument("--user", help="who imports it (needs loop.edit_thesis); default: the first superuser")

    def handle(self, *args, definition, workloads, ranges, atol, rtol, user, inputs, check, **options):
        users = get_user_model().objects
        actor = users.filter(username=user).first() if user else users.filter(is_superuser=True).order_by("pk").first()
        if actor is None:
            raise CommandError(f"no user {user!r}" if user else "no superuser: pass --user")
        tolerance = {k: v for k, v in (("atol", atol), ("rtol", rtol)) if v is not None}
        try:
            declared = json.loads(_read(inputs) or "{}")
        except json.JSONDecodeError as exc:
            raise CommandError(f"{inputs}: not JSON: {exc}") from exc
        if not isinstance(declared, dict):
            raise CommandError(f"{inputs}: expected a JSON object with 'inputs' and optionally 'check'")
        try:
            target = fib_definition_import(actor=actor, definition_text=_read(definition),
                                           workloads_text=_read(workloads), ranges=ranges, tolerance=tolerance,
                                           source=(workloads or definition).name,
                                           inputs=declared.get("inputs") or None, check=check or declared.get("check"))
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        except PermissionDenied as exc:
            raise CommandError(str(exc)) from exc
        cells = len(target.document.get("cells") or [])
        ranges_text = ", ".join(f"{a} {lo}..{hi}" for a, (lo, hi) in target.axes.items())
        self.stdout.write(f"target {target.name} imported: {ranges_text}; {cells} workload cells")
