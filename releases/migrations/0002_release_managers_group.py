"""The "Release managers" group: may run assessments and see everything about releases."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

GROUP = "Release managers"
PERMISSIONS = [
    "run_assessment",
    "view_release",
    "view_riskreport",
    "view_conversation",
    "view_message",
    "view_agentevent",
]


def ensure_permissions(apps):
    """Permissions are normally created after all migrations; this one needs them now."""
    app_config = apps.get_app_config("releases")
    app_config.models_module = True
    create_permissions(app_config, apps=apps, verbosity=0)
    app_config.models_module = None


def create_group(apps, schema_editor):
    ensure_permissions(apps)
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group, _ = Group.objects.get_or_create(name=GROUP)
    group.permissions.add(
        *Permission.objects.filter(content_type__app_label="releases", codename__in=PERMISSIONS)
    )


def delete_group(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name=GROUP).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("releases", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_group, delete_group)]
