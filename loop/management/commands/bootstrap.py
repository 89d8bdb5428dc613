"""First start on a machine: roles, an admin login, the shipped skills, targets and a demo thesis.
Safe to run again: it changes nothing that exists."""

import os
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from loop.models import Target, Thesis
from loop.roles import ensure_groups
from loop.services.skills import skill_import_tree
from loop.services.targets import target_sync
from loop.services.theses import thesis_create

DEMO_TITLE = "Top-2048 over 128K logits: one pass instead of a full sort"
DEMO_BODY = """**Diagnosis.** The DSA indexer's top-k selects 2048 of up to 128K logits per row. `torch.topk`
takes 197 us for 64 rows of 128K on an H200, while reading those logits once takes 7.8 us: the
default is latency-bound, far above its memory floor.

**Proposal.** A radix select: histogram the order-preserving bits of each row to find the k-th
value, then write the indices above it and enough of those equal to it. Split long rows across
several programs so that few rows still fill the GPU.

**Exactness.** Ties are common (ReLU sums); the result is checked as a set, with heavy tie buckets.
"""


class Command(BaseCommand):
    help = "Create roles, an admin login (printed once, kept in var/admin-login.txt), and demo content."

    def add_arguments(self, parser):
        parser.add_argument("--hardware", default=os.environ.get("ARK_HARDWARE", "cpu"),
                            help="hardware kind of the demo thesis (the local GPU worker's queue)")

    def handle(self, *args, **options):
        ensure_groups()
        username, password = self._admin()
        admin = get_user_model().objects.get(username=username)
        targets = target_sync(actor=admin)
        result = skill_import_tree(actor=admin, root=settings.SKILLS_DIR)
        self.stdout.write(f"targets: {', '.join(t.name for t in targets)}; skills: {len(result['created'])} new, "
                          f"{len(result['updated'])} updated, {len(result['unchanged'])} unchanged")
        if not Thesis.objects.exists():
            thesis_create(
                actor=admin, title=DEMO_TITLE, body=DEMO_BODY, target=Target.objects.get(name="dsa_topk"),
                hardware=options["hardware"], model="deepseek-v3.2",
                constraints="k = 2048; exact as a set; CUDA graphs on; same operating range.", priority=10,
            )
            self.stdout.write(f"demo thesis created for hardware {options['hardware']}")
        self.stdout.write(self.style.SUCCESS(f"admin login: {username} / {password}"))

    def _admin(self) -> tuple[str, str]:
        login_file = settings.VAR_DIR / "admin-login.txt"
        User = get_user_model()
        if login_file.exists() and User.objects.filter(username="admin").exists():
            return tuple(login_file.read_text().split(maxsplit=1))
        password = secrets.token_urlsafe(12)
        user, _ = User.objects.get_or_create(username="admin", defaults={"is_staff": True, "is_superuser": True})
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        login_file.parent.mkdir(parents=True, exist_ok=True)
        login_file.write_text(f"admin {password}\n")
        login_file.chmod(0o600)
        return "admin", password
