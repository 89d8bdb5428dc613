from django.core.management.base import BaseCommand

from loop.services.targets import target_sync


class Command(BaseCommand):
    help = "Create or update one Target row per target registered in gpu_worker.targets."

    def handle(self, *args, **options):
        for target in target_sync():
            self.stdout.write(f"{target.name} v{target.version}: axes {target.axes}, DSLs {', '.join(target.dsls)}")
