"""scripts/test runs the whole suite on PostgreSQL and, on SQLite, the tests of the code that differs by
database (docs/conventions.md, "One database in the tests, both in use"). This keeps that SQLite list whole:
every module of the web side that branches on the database, runs raw SQL, configures SQLite or stores JSON
documents has a test file here, and that file is in the script's list."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DIFFERS = re.compile(r"connection\.vendor|\.cursor\(\)|sqlite|OrderedJSONField")
# module -> the test file that exercises what differs in it
COVERED_BY = {
    "console/auth.py": "tests/console/test_request_cost.py",            # one raw query per vendor
    "console/settings.py": "tests/foundation/test_settings_and_migrations.py",  # DATABASES, SQLite's options
    "loop/selectors.py": "tests/console/test_audit_page.py",            # the audit filter's recursive SQL
    "loop/audit.py": "tests/security/test_audit_integrity.py",          # append-only triggers per vendor
    "loop/fields.py": "tests/interop/test_fib_console.py",              # a definition's inputs, in order
    "loop/models.py": "tests/loop/services/test_deployments.py",        # a serving config's document, as written
}


def _sqlite_pass() -> list[str]:
    text = (ROOT / "scripts" / "test").read_text()
    body = re.search(r"SQLITE_PASS=\(([^)]*)\)", text).group(1)
    return body.split()


def test_every_module_that_differs_by_database_is_tested_on_sqlite_too():
    found = sorted(str(p.relative_to(ROOT)) for part in ("console", "loop") for p in (ROOT / part).rglob("*.py")
                   if "migrations" not in p.parts and DIFFERS.search(p.read_text()))
    assert found == sorted(COVERED_BY), "a module that differs by database needs an entry in COVERED_BY"
    listed = _sqlite_pass()
    for module, tests in COVERED_BY.items():
        assert (ROOT / tests).exists(), tests
        assert any(tests == entry or tests.startswith(entry + "/") for entry in listed), (module, tests, listed)


def test_the_sqlite_pass_names_only_paths_that_exist():
    for entry in _sqlite_pass():
        assert (ROOT / entry).exists(), entry
