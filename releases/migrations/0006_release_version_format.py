"""Release versions follow one format (releases/validation.py); existing rows are reported.

Rows that break the format are listed, not changed: a version is what people and other
systems know a release by, so only a person should rename it (in the admin, which links
releases by id and so still reaches them).
"""

import sys

from django.db import migrations, models

import releases.validation


def report_bad_versions(apps, schema_editor):
    Release = apps.get_model("releases", "Release")
    bad = [
        (pk, version)
        for pk, version in Release.objects.values_list("pk", "version").iterator()
        if not releases.validation.is_valid_version(version)
    ]
    if not bad:
        return
    lines = [
        f"\n  {len(bad)} release version(s) do not follow the format "
        f"({releases.validation.VERSION_FORMAT}); rename them in the admin "
        "(/admin/releases/release/<id>/change/):"
    ]
    lines += [f"    id {pk}: {version!r}" for pk, version in bad]
    sys.stdout.write("\n".join(lines) + "\n")


class Migration(migrations.Migration):
    dependencies = [("releases", "0005_risk_policy")]

    operations = [
        migrations.AlterField(
            model_name="release",
            name="version",
            field=models.CharField(
                help_text=(
                    'e.g. v2.1.0 or 1.0.0-rc.1: letters, digits, ".", "-", "_" and "+" only, '
                    "1 to 64 characters."
                ),
                max_length=64,
                unique=True,
                validators=[releases.validation.validate_version],
            ),
        ),
        migrations.RunPython(report_bad_versions, migrations.RunPython.noop, elidable=True),
    ]
