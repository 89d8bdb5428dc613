from django.core.management.base import BaseCommand, CommandError

from loop.audit import verify_chain
from loop.models import Event


class Command(BaseCommand):
    help = "Check the event log's hash chain; exits non-zero naming each broken event."

    def handle(self, *args, **options):
        problems = verify_chain()
        if problems:
            for problem in problems:
                self.stderr.write(problem)
            raise CommandError(f"audit chain broken: {len(problems)} problem(s)")
        self.stdout.write(f"audit chain intact: {Event.objects.count()} events")
