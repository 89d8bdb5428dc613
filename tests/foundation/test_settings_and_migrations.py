import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

ROOT = Path(__file__).resolve().parents[2]


def manage(*args, **env_extra):
    env = {**os.environ, **env_extra}
    return subprocess.run([sys.executable, "manage.py", *args], check=False, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


def test_check_deploy_is_clean_in_production_mode():
    result = manage("check", "--deploy", "--fail-level", "WARNING", DJANGO_ENV="production",
                    DJANGO_SECRET_KEY=secrets.token_urlsafe(50), DJANGO_ALLOWED_HOSTS="ark.example.com")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_development_settings_do_fail_check_deploy():
    result = manage("check", "--deploy", "--fail-level", "WARNING", DJANGO_ENV="development")
    assert result.returncode != 0


def test_production_mode_requires_its_secrets():
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SECRET_KEY", "DJANGO_ALLOWED_HOSTS")}
    result = subprocess.run([sys.executable, "manage.py", "check"], check=False, cwd=ROOT, capture_output=True, text=True,
                            env={**env, "DJANGO_ENV": "production"}, timeout=120)
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY" in result.stderr


@pytest.mark.django_db
def test_migrations_match_the_models():
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)


@pytest.mark.django_db
def test_sqlite_runs_in_wal_mode_with_immediate_transactions():
    from django.db import connection

    if connection.vendor != "sqlite":
        pytest.skip("checks SQLite's WAL and busy-timeout settings; this pass runs on PostgreSQL")
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode")
        assert cursor.fetchone()[0] == "wal"
        cursor.execute("PRAGMA busy_timeout")
        assert cursor.fetchone()[0] >= 5000
    assert connection.settings_dict["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
