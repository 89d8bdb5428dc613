"""Add a person or set their roles from a shell: the same service as the console's Users page."""

import getpass

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from loop.services.users import ASSIGNABLE, user_create, user_roles_set


class Command(BaseCommand):
    help = ("Add a person (asks for a password) or change their roles: "
            f"manage.py user_set NAME --roles {','.join(ASSIGNABLE)} [--admin]. Done as the first admin.")

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--roles", default="", help=f"comma-separated, of {', '.join(ASSIGNABLE)} (none: empty)")
        parser.add_argument("--admin", action="store_true", help="make them an admin (every role, the Users page)")
        parser.add_argument("--password-stdin", action="store_true", help="read a new person's password from stdin")

    def handle(self, *args, username, roles, admin, password_stdin, **options):
        User = get_user_model()
        actor = User.objects.filter(is_superuser=True).order_by("pk").first()
        if actor is None:
            raise CommandError("no admin yet: run scripts/run once (it creates one) or manage.py createsuperuser")
        wanted = [r.strip() for r in roles.split(",") if r.strip()]
        user = User.objects.filter(username=username).first()
        try:
            if user is None:
                password = input() if password_stdin else getpass.getpass(f"password for {username}: ")
                user = user_create(actor=actor, username=username, password=password, roles_wanted=wanted, admin=admin)
                self.stdout.write(f"added {username}: {', '.join(wanted) or 'no role'}{' + admin' if admin else ''}")
            else:
                user_roles_set(actor=actor, user=user, roles_wanted=wanted, admin=admin)
                self.stdout.write(f"{username}: {', '.join(wanted) or 'no role'}{' + admin' if admin else ''}")
        except ValidationError as error:
            raise CommandError("; ".join(error.messages)) from error
