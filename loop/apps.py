from django.apps import AppConfig
from django.db.models.signals import post_migrate


class LoopConfig(AppConfig):
    name = "loop"
    verbose_name = "ark loop"

    def ready(self):
        # local: Django's app registry must be ready before these modules' models and signals load
        from loop import audit, roles
        from loop.services import access  # noqa: F401  (connects the login and failed-login events)

        audit.install_connection_hooks()
        post_migrate.connect(roles.ensure_groups, sender=self, dispatch_uid="ark_ensure_groups")
