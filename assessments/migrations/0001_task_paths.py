"""The assessment task moved from `releases.tasks` to `assessments.tasks` (2026-11-27).

django-tasks' database backend stores each task by its import path, and a worker imports that
path to run it: a run queued before the move would fail with "does not point to a Task". Every
stored row is renamed, the finished ones too, so a run's task row reads the same as a new one.
"""

from django.db import migrations

OLD = "releases.tasks."
NEW = "assessments.tasks."


def _rename(apps, old: str, new: str) -> None:
    from django.db.models import Value
    from django.db.models.functions import Concat, Substr

    DBTaskResult = apps.get_model("django_tasks_database", "DBTaskResult")
    DBTaskResult.objects.filter(task_path__startswith=old).update(
        task_path=Concat(Value(new), Substr("task_path", len(old) + 1))
    )


def forwards(apps, schema_editor) -> None:
    _rename(apps, OLD, NEW)


def backwards(apps, schema_editor) -> None:
    _rename(apps, NEW, OLD)


class Migration(migrations.Migration):
    dependencies = [("django_tasks_database", "0021_conditional_partial_index_ordering")]

    operations = [migrations.RunPython(forwards, backwards)]
