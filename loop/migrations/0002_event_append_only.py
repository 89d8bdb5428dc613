"""The event log refuses UPDATE and DELETE at the database level.

SQLite: triggers that abort unless the connection's `ark_audit_unlocked()` says so (a function the
app registers per connection, returning 0; a client without it cannot change rows either).
PostgreSQL: a trigger function that raises unless the session set `ark.audit_unlocked` to on.
Both unlocks exist for test-database teardown; the hash chain catches any other change.
"""

from django.db import migrations

SQLITE_CREATE = [
    """CREATE TRIGGER loop_event_no_update BEFORE UPDATE ON loop_event
       WHEN ark_audit_unlocked() = 0
       BEGIN SELECT RAISE(ABORT, 'loop_event is append-only: UPDATE refused'); END""",
    """CREATE TRIGGER loop_event_no_delete BEFORE DELETE ON loop_event
       WHEN ark_audit_unlocked() = 0
       BEGIN SELECT RAISE(ABORT, 'loop_event is append-only: DELETE refused'); END""",
]
SQLITE_DROP = ["DROP TRIGGER IF EXISTS loop_event_no_update", "DROP TRIGGER IF EXISTS loop_event_no_delete"]

POSTGRES_CREATE = [
    """CREATE OR REPLACE FUNCTION loop_event_refuse_change() RETURNS trigger AS $$
       BEGIN
         IF coalesce(current_setting('ark.audit_unlocked', true), 'off') = 'on' THEN
           RETURN COALESCE(NEW, OLD);
         END IF;
         RAISE EXCEPTION 'loop_event is append-only: % refused', TG_OP;
       END $$ LANGUAGE plpgsql""",
    """CREATE TRIGGER loop_event_append_only BEFORE UPDATE OR DELETE ON loop_event
       FOR EACH ROW EXECUTE FUNCTION loop_event_refuse_change()""",
]
POSTGRES_DROP = [
    "DROP TRIGGER IF EXISTS loop_event_append_only ON loop_event",
    "DROP FUNCTION IF EXISTS loop_event_refuse_change()",
]


def _run(statements_by_vendor):
    def apply(apps, schema_editor):
        for statement in statements_by_vendor.get(schema_editor.connection.vendor, []):
            schema_editor.execute(statement, params=None)  # None: psycopg 3 must not parse the '%' in RAISE

    return apply


class Migration(migrations.Migration):
    dependencies = [("loop", "0001_initial")]

    operations = [
        migrations.RunPython(
            _run({"sqlite": SQLITE_CREATE, "postgresql": POSTGRES_CREATE}),
            _run({"sqlite": SQLITE_DROP, "postgresql": POSTGRES_DROP}),
        ),
    ]
