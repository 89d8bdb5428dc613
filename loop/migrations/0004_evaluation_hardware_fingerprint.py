from django.db import migrations


class Migration(migrations.Migration):
    """Evaluation.hardware held the GPU's fingerprint (a dict) while Run.hardware is a kind string:
    one name per idea."""

    dependencies = [
        ("loop", "0003_engine_fields"),
    ]

    operations = [
        migrations.RenameField(model_name="evaluation", old_name="hardware", new_name="hardware_fingerprint"),
    ]
