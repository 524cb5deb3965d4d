"""Releases belong to a service: the existing ones (the demo's, those typed in by hand) to the
default service this migration creates; a release is unique by service and version."""

import django.core.validators
import django.db.models.deletion
import django.utils.timezone
import releases.models
from django.db import migrations, models


DEFAULT_SLUG = "default"
DEFAULT_NAME = "Default service"


def default_service(apps, schema_editor):
    Service = apps.get_model("releases", "Service")
    Release = apps.get_model("releases", "Release")
    service, _ = Service.objects.get_or_create(slug=DEFAULT_SLUG, defaults={"name": DEFAULT_NAME})
    Release.objects.filter(service__isnull=True).update(service=service)


class Migration(migrations.Migration):

    dependencies = [
        ('releases', '0007_review_decision'),
    ]

    operations = [
        migrations.CreateModel(
            name='Service',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=100, unique=True)),
                ('slug', models.SlugField(max_length=100, unique=True)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                'ordering': ['name'],
            },
        ),
        migrations.AddField(
            model_name='release',
            name='deployed_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='release',
            name='environment',
            field=models.CharField(blank=True, help_text='e.g. production, staging.', max_length=64),
        ),
        migrations.AddField(
            model_name='release',
            name='git_from_ref',
            field=models.CharField(blank=True, help_text="The range's start, e.g. v2.0.0.", max_length=255, verbose_name='git from'),
        ),
        migrations.AddField(
            model_name='release',
            name='git_to_ref',
            field=models.CharField(blank=True, help_text="The range's end, e.g. v2.1.0.", max_length=255, verbose_name='git to'),
        ),
        migrations.AddField(
            model_name='release',
            name='head_sha',
            field=models.CharField(blank=True, max_length=64, validators=[django.core.validators.RegexValidator('\\A[0-9a-f]{7,64}\\Z', 'A SHA is 7 to 64 hex digits.')], verbose_name='head SHA'),
        ),
        migrations.AddField(
            model_name='release',
            name='pipeline_url',
            field=models.URLField(blank=True, max_length=500, verbose_name='pipeline run'),
        ),
        migrations.AlterField(
            model_name='release',
            name='version',
            field=models.CharField(help_text='e.g. v2.1.0 or 1.0.0-rc.1: letters, digits, ".", "-", "_" and "+" only, 1 to 64 characters.', max_length=64, validators=[django.core.validators.RegexValidator(code='invalid_version', message='A release version may contain letters, digits, ".", "-", "_" and "+" only, 1 to 64 characters.', regex='\\A[A-Za-z0-9._+-]{1,64}\\Z')]),
        ),
        migrations.AddField(
            model_name='release',
            name='service',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.PROTECT, related_name='releases', to='releases.service'),
        ),
        migrations.RunPython(default_service, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='release',
            name='service',
            field=models.ForeignKey(default=releases.models.default_service_id, on_delete=django.db.models.deletion.PROTECT, related_name='releases', to='releases.service'),
        ),
        migrations.AddConstraint(
            model_name='release',
            constraint=models.UniqueConstraint(fields=('service', 'version'), name='release_unique_service_version', violation_error_message='This service already has a release of this version.'),
        ),
    ]
