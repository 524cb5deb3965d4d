# Issue 30 (evidence): the policy's evidence the model's findings left out, kept on the report.

import releases.schemas
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("releases", "0014_client_pipeline_waiting"),
    ]

    operations = [
        migrations.AddField(
            model_name="riskreport",
            name="policy_findings",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text="Findings the policy added: its evidence the model's findings left out.",
                validators=[releases.schemas.validate_findings],
            ),
        ),
    ]
