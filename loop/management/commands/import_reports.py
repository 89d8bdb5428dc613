from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from loop.models import Thesis
from loop.services.imports import reports_import
from loop.services.targets import target_sync


class Command(BaseCommand):
    help = "Load GPU reports (ark.report/1 files and latest.json, e.g. bench/results/h200) as finished runs."

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path)
        parser.add_argument("--user", help="who imports (default: the first superuser)")
        parser.add_argument("--thesis", type=int, help="attach the runs to this thesis")

    def handle(self, *args, path: Path, user: str | None, thesis: int | None, **options):
        users = get_user_model().objects
        actor = users.filter(username=user).first() if user else users.filter(is_superuser=True).order_by("pk").first()
        if actor is None:
            raise CommandError("no such user" if user else "no superuser to import as: pass --user")
        the_thesis = Thesis.objects.filter(pk=thesis).first() if thesis else None
        if thesis and the_thesis is None:
            raise CommandError(f"no thesis {thesis}")
        target_sync()
        try:
            runs = reports_import(path=path, actor=actor, thesis=the_thesis)
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        if not runs:
            self.stdout.write(f"{path}: already imported")
        for run in runs:
            kept = run.candidates.filter(status="kept").count()
            self.stdout.write(f"run {run.pk}: {run.candidates.count()} reports for {run.thesis.target.name} "
                              f"measured on {run.imported_device} {run.imported_date}, {kept} kept")
