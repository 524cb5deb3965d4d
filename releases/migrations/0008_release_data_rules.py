"""One validation for the stored release data (releases/schemas.py); existing rows are reported.

The data fields now read through StoredJSONDecoder (a value that cannot be read counts as
missing instead of breaking a page) and the model holds every rule the API holds. Rows that
break the rules are listed, not changed: only a person knows what a figure should have been
(the admin links releases by id, so it still reaches them).
"""

import json
import sys

from django.core.exceptions import ValidationError
from django.db import migrations, models

import releases.schemas
import releases.stored_data
import releases.validation

CHECKS = {
    "changes": releases.schemas.validate_changes,
    "test_results": releases.schemas.validate_test_results,
    "deployment_metrics": releases.schemas.validate_deployment_metrics,
}


def _problem(raw, check):
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except RecursionError:
        return "nested too deep to read"
    except ValueError as error:
        return f"cannot be read ({str(error)[:80]})"
    try:
        check(value)
    except ValidationError as error:
        return "; ".join(error.messages)[:300]
    return None


def report_bad_rows(apps, schema_editor):
    table = apps.get_model("releases", "Release")._meta.db_table
    quote = schema_editor.connection.ops.quote_name
    columns = ", ".join(quote(name) for name in ("id", "version", "title", *CHECKS))
    bad = []
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"SELECT {columns} FROM {quote(table)} ORDER BY {quote('id')}")
        for pk, version, title, *raws in cursor.fetchall():
            problems = [
                f"{name}: {problem}"
                for name, raw in zip(CHECKS, raws, strict=True)
                if (problem := _problem(raw, CHECKS[name]))
            ]
            if title and (problem := releases.validation.text_problem(title)):
                problems.append(f"title {problem}")
            if problems:
                bad.append((pk, version, problems))
    if not bad:
        return
    lines = [
        f"\n  {len(bad)} release(s) hold data that breaks the rules (pages show it as missing); "
        "correct them in the admin (/admin/releases/release/<id>/change/):"
    ]
    for pk, version, problems in bad:
        lines.append(f"    id {pk} ({version!r}): " + " | ".join(problems))
    sys.stdout.write("\n".join(lines) + "\n")


class Migration(migrations.Migration):
    dependencies = [("releases", "0007_review_decision")]

    operations = [
        migrations.AlterField(
            model_name="release",
            name="changes",
            field=models.JSONField(
                blank=True,
                decoder=releases.stored_data.StoredListDecoder,
                help_text='A list of change descriptions, e.g. ["Added payment processing"]. '
                "Empty means missing.",
                null=True,
                validators=[releases.schemas.validate_changes],
            ),
        ),
        migrations.AlterField(
            model_name="release",
            name="deployment_metrics",
            field=models.JSONField(
                blank=True,
                decoder=releases.stored_data.StoredObjectDecoder,
                help_text='e.g. {"error_rate": 0.02, "response_time_p95": 450} (p95 in ms). '
                "Known metrics: error_rate, response_time_p95, response_time_p95_baseline, "
                "response_time_p50, response_time_p99, cpu_utilization, memory_utilization, "
                "availability, requests_per_second. Empty means missing.",
                null=True,
                validators=[releases.schemas.validate_deployment_metrics],
            ),
        ),
        migrations.AlterField(
            model_name="release",
            name="test_results",
            field=models.JSONField(
                blank=True,
                decoder=releases.stored_data.StoredObjectDecoder,
                help_text='e.g. {"passed": 142, "failed": 2, "skipped": 5, "failing_tests": '
                '["..."]}. Empty means missing.',
                null=True,
                validators=[releases.schemas.validate_test_results],
            ),
        ),
        migrations.AlterField(
            model_name="release",
            name="title",
            field=models.CharField(
                blank=True, max_length=200, validators=[releases.validation.validate_plain_text]
            ),
        ),
        migrations.RunPython(report_bad_rows, migrations.RunPython.noop, elidable=True),
    ]
