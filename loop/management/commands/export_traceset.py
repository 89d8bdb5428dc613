from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from loop.models import Run
from loop.services.fib import fib_traceset_export


class Command(BaseCommand):
    help = "Write a run on an imported target as a FlashInfer-Bench TraceSet directory (docs/interop.md)."

    def add_arguments(self, parser):
        parser.add_argument("--run", type=int, required=True, help="the run's id")
        parser.add_argument("--out", type=Path, required=True, help="the TraceSet directory (replaced)")

    def handle(self, *args, run: int, out: Path, **options):
        the_run = Run.objects.select_related("thesis__target").filter(pk=run).first()
        if the_run is None:
            raise CommandError(f"no run {run}")
        try:
            result = fib_traceset_export(run=the_run, out=out)
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        self.stdout.write(f"{result['path']}: {result['solutions']} solutions, {result['traces']} traces "
                          f"({result['untimed_shapes']} passing shapes untimed: CPU worker)")
