"""Release managers may see evaluation runs and their results."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

GROUP = "Release managers"
PERMISSIONS = ["view_evalrun", "view_evalresult"]


def grant(apps, schema_editor):
    app_config = apps.get_app_config("evals")
    app_config.models_module = True
    create_permissions(app_config, apps=apps, verbosity=0)
    app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group, _ = Group.objects.get_or_create(name=GROUP)
    group.permissions.add(
        *Permission.objects.filter(content_type__app_label="evals", codename__in=PERMISSIONS)
    )


def revoke(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for group in Group.objects.filter(name=GROUP):
        group.permissions.remove(
            *Permission.objects.filter(content_type__app_label="evals", codename__in=PERMISSIONS)
        )


class Migration(migrations.Migration):
    dependencies = [
        ("evals", "0001_initial"),
        ("releases", "0002_release_managers_group"),
    ]

    operations = [migrations.RunPython(grant, revoke)]
