"""First start on a machine: roles, an admin login, the shipped skills, targets and the shipped theses.
Safe to run again: it changes nothing that exists (a shipped thesis is added only where none has its title)."""

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

RUNNING_TOPK_TITLE = "FP8 indexer: logits in 32K chunks, merged into a running top-k"
RUNNING_TOPK_BODY = """**Thesis (from a talk on DeepSeek-V3.2 serving).** Produce a 128K row's logits in 32K chunks and keep a
running top-2048 across them instead of writing every logit and selecting at the end: the logits never reach
memory in full.

**Measured (H200, 2026-12-04, 64 x 131072, normal values, eager means of 20 calls; docs/kernels.md, "Thesis:
logits in 32K chunks merged").** 32K chunks merged by an exact one-program-per-row select: 1142 us; the same
in one 128K chunk: 1008 us; the logits written once, then the parallel top-k: 699 us. Refuted for that merge:
each merge re-reads the running 2048 and selects in one program per row, while what chunking saves (the 32 MB
logits write, ~8 us) is small beside the 1.1 GB K read. In the e2e decode step (H100, 2026-12-07, the FP8
slot's gate, docs/kernels.md "In the e2e decode step") the seed built this way gives 0.42-1.04x the default's
tokens/s, slower from 32K contexts up, where the logits-then-parallel-top-k best gives 1.13-1.26x.

**Still open.** The running top-k pays only with a filter inside the logits kernel: keep only logits above a
sampled threshold (as dsa_topk's filter does), so that the select reads a few thousand candidates per row.
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
        shipped = [(DEMO_TITLE, DEMO_BODY, "dsa_topk", "k = 2048; exact as a set; CUDA graphs on; same operating range.",
                    10),
                   (RUNNING_TOPK_TITLE, RUNNING_TOPK_BODY, "dsa_indexer_topk_fp8",
                    "k = 2048; the target's FP8 set check; CUDA graphs on; same operating range.", 5)]
        for title, body, target, constraints, priority in shipped:
            if Thesis.objects.filter(title=title).exists():
                continue
            thesis_create(actor=admin, title=title, body=body, target=Target.objects.get(name=target),
                          hardware=options["hardware"], model="deepseek-v3.2", constraints=constraints,
                          priority=priority)
            self.stdout.write(f"thesis created for hardware {options['hardware']}: {title}")
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
