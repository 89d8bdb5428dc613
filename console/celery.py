"""The web side's Celery app: it runs the `loop` queue and sends GPU tasks by name."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("ark")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["loop"])
