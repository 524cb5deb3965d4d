"""Release managers add and correct releases and ingest their sources (without being staff)."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

GROUP = "Release managers"
PERMISSIONS = [
    "ingest_release",
    "view_ingestion",
    "view_commit",
    "view_commitfile",
    "view_testcase",
    "view_metricsample",
]


def grant(apps, schema_editor):
    # Permissions are normally created after all migrations; this one needs them now.
    app_config = apps.get_app_config("sources")
    app_config.models_module = True
    create_permissions(app_config, apps=apps, verbosity=0)
    app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group, _ = Group.objects.get_or_create(name=GROUP)
    group.permissions.add(
        *Permission.objects.filter(content_type__app_label="sources", codename__in=PERMISSIONS)
    )


def revoke(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group = Group.objects.filter(name=GROUP).first()
    if group is not None:
        group.permissions.remove(
            *Permission.objects.filter(content_type__app_label="sources", codename__in=PERMISSIONS)
        )


class Migration(migrations.Migration):
    dependencies = [
        ("sources", "0001_initial"),
        ("releases", "0008_service_and_provenance"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(grant, revoke)]
