from django.core.management.base import BaseCommand, CommandError

from loop.audit import anchor_path, verify_chain
from loop.models import Event


class Command(BaseCommand):
    help = ("Check the event log's keyed hash chain (ARK_AUDIT_KEY) and its anchor file outside the database; "
            "exits non-zero naming each broken event (docs/security.md).")

    def handle(self, *args, **options):
        problems = verify_chain()
        if problems:
            for problem in problems:
                self.stderr.write(problem)
            raise CommandError(f"audit chain broken: {len(problems)} problem(s)")
        anchor = anchor_path()
        anchored = len(anchor.read_text().splitlines()) if anchor.exists() else 0
        self.stdout.write(f"audit chain intact: {Event.objects.count()} events; {anchored} anchored in {anchor}")
