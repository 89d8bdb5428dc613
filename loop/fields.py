"""A JSON document stored as its text.

PostgreSQL keeps a JSONField as jsonb, which reorders an object's keys (shorter first, then by bytes); SQLite
keeps the text. Where the order is part of the meaning (a FlashInfer-Bench definition's `inputs` are its
kernel's arguments, in order; a serving config's document is exported as it was written), the same code read
different documents on the two databases. This field stores json.dumps of the value and reads it back with the
order it had, on both (docs/conventions.md, "One database in the tests, both in use")."""

import json

from django.db import models


class OrderedJSONField(models.TextField):
    def from_db_value(self, value, expression, connection):
        return None if value is None else json.loads(value)

    def to_python(self, value):
        return json.loads(value) if isinstance(value, str) else value

    def get_prep_value(self, value):
        return None if value is None else json.dumps(value)

    def value_to_string(self, obj):
        return self.get_prep_value(self.value_from_object(obj))
