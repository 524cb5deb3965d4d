# Issue 29 (helper "client"): since when a CI job waits for a person's decision on a report.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("releases", "0013_gate_service_names_and_versions"),
    ]

    operations = [
        migrations.AddField(
            model_name="riskreport",
            name="pipeline_waiting_since",
            field=models.DateTimeField(
                blank=True,
                help_text="Since when a pipeline waits for a person's decision on this report.",
                null=True,
            ),
        ),
    ]
