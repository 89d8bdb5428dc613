"""Preflight every configured LLM endpoint and model (loop/proposer_config.py): run it after changing
ARK_LLM_ENDPOINTS or a key, before starting runs. Exits non-zero naming what to fix."""

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from loop.proposer_config import llm_endpoints, llm_preflight


class Command(BaseCommand):
    help = "Check each configured LLM endpoint: key present, reachable, every allowed model listed by /models."

    def handle(self, *args, **options):
        endpoints = llm_endpoints()
        if not endpoints:
            raise CommandError("No LLM endpoint is configured (ARK_LLM_ENDPOINTS, or ARK_LLM_BASE_URL and "
                               "ARK_LLM_MODEL).")
        failed = 0
        for name, endpoint in sorted(endpoints.items()):
            for model in endpoint.models or ("",):
                try:
                    llm_preflight({"endpoint": name, "model": model} if model else {"endpoint": name})
                except ValidationError as error:
                    failed += 1
                    self.stderr.write(f"{name} {model}: " + " ".join(error.messages))
                else:
                    self.stdout.write(f"{name} {model}: ok ({endpoint.url})")
        if failed:
            raise CommandError(f"{failed} endpoint/model pair(s) failed the preflight")
