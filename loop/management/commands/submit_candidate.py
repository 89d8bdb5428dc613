from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError

from loop.models import Run
from loop.proposers.human import candidate_submit_human
from loop.services.candidates import CandidateRejected


class Command(BaseCommand):
    help = "Submit a candidate source file to a run as a person (checked before anything is queued)."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument("--run", type=int, required=True, help="the run's id")
        parser.add_argument("--user", help="who submits it (needs loop.edit_thesis); default: the run's creator")
        parser.add_argument("--note", default="")

    def handle(self, *args, file: Path, run: int, user: str | None, note: str, **options):
        try:
            source = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"cannot read {file}: {exc}") from exc
        the_run = Run.objects.filter(pk=run).first()
        if the_run is None:
            raise CommandError(f"no run {run}")
        actor = get_user_model().objects.filter(username=user).first() if user else the_run.created_by
        if actor is None:
            raise CommandError(f"no user {user!r}")
        try:
            candidate = candidate_submit_human(run=the_run, actor=actor, source=source, note=note)
        except CandidateRejected as exc:
            raise CommandError("rejected: " + "; ".join(exc.problems)) from exc
        except PermissionDenied as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"candidate {the_run.pk}.{candidate.number} (id {candidate.pk}) proposed; "
                          f"it is queued when a {the_run.hardware} worker is free")
