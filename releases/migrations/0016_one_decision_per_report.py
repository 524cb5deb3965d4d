"""One decision per report (issue 37): a later decision names the one it supersedes, and the
database refuses a second first decision on a report. Existing reports with several decisions
get their chain: each decision supersedes the one before it, oldest first, so the history and
the newest decision stay as they were."""

import django.db.models.deletion
from django.db import migrations, models


def link_earlier_decisions(apps, schema_editor):  # noqa: ANN001, ANN201
    decision_model = apps.get_model("releases", "ReviewDecision")
    earlier: dict[int, int] = {}
    rows = decision_model.objects.order_by("report_id", "created_at", "id").values_list(
        "id", "report_id"
    )
    for pk, report_id in rows.iterator():
        previous = earlier.get(report_id)
        if previous is not None:
            decision_model.objects.filter(pk=pk).update(supersedes_id=previous)
        earlier[report_id] = pk


class Migration(migrations.Migration):
    dependencies = [
        ("releases", "0015_evidence_policy_findings"),
    ]

    operations = [
        migrations.AddField(
            model_name="reviewdecision",
            name="supersedes",
            field=models.OneToOneField(
                blank=True,
                help_text="The earlier decision on the same report this one explicitly replaces.",
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="superseded_by",
                to="releases.reviewdecision",
            ),
        ),
        migrations.RunPython(link_earlier_decisions, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="reviewdecision",
            constraint=models.UniqueConstraint(
                condition=models.Q(("supersedes__isnull", True)),
                fields=("report",),
                name="reviewdecision_one_first_per_report",
                violation_error_message="This report was already decided.",
            ),
        ),
    ]
