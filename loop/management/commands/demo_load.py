from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from loop.services.demo import demo_load
from loop.services.targets import target_sync


class Command(BaseCommand):
    help = ("Load the demo: the reports recorded on an H200 (bench/results/h200/2026-12-04) as finished runs, and "
            "a gate-mode run whose recorded candidates await review. Running it again adds nothing.")

    def add_arguments(self, parser):
        parser.add_argument("--user", help="who loads it (default: the first superuser)")

    def handle(self, *args, user: str | None = None, **options):
        users = get_user_model().objects
        actor = users.filter(username=user).first() if user else users.filter(is_superuser=True).order_by("pk").first()
        if actor is None:
            raise CommandError("no such user" if user else "no superuser to load the demo as: run bootstrap first")
        target_sync()
        result = demo_load(actor=actor)
        run = result["gate_run"]
        if run is None:
            self.stdout.write("demo: already loaded")
            return
        waiting = run.candidates.filter(status="awaiting_review").count()
        self.stdout.write(f"demo: {len(result['imported'])} recorded runs imported; run {run.pk} "
                          f"({run.imported_device}, {run.imported_date}) holds {waiting} candidates awaiting review")
