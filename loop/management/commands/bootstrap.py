"""First start on a machine: roles, an admin login, the shipped skills, targets and a demo thesis.
Safe to run again: it changes nothing that exists."""

import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from loop.roles import ensure_groups


class Command(BaseCommand):
    help = "Create roles, an admin login (printed once, kept in var/admin-login.txt), and demo content."

    def handle(self, *args, **options):
        ensure_groups()
        username, password = self._admin()
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
