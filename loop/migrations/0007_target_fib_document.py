from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("loop", "0006_candidate_measured_against"),
    ]

    operations = [
        migrations.AddField(
            model_name="target",
            name="document",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
