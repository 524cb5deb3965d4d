# Service names and release versions: the column's length, and not ".", ".." or a leading
# "-" (issue 29). Validators only: no schema change.

import django.core.validators
import releases.validation
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('releases', '0012_service_hidden'),
    ]

    operations = [
        migrations.AlterField(
            model_name='release',
            name='version',
            field=models.CharField(help_text='e.g. v2.1.0 or 1.0.0-rc.1: letters, digits, ".", "-", "_" and "+" only, not starting with "." or "-", 1 to 64 characters.', max_length=64, validators=[django.core.validators.RegexValidator(code='invalid_version', message='A release version may contain letters, digits, ".", "-", "_" and "+" only, not starting with "." or "-", 1 to 64 characters.', regex='\\A[A-Za-z0-9_+][A-Za-z0-9._+-]{0,63}\\Z')]),
        ),
        migrations.AlterField(
            model_name='service',
            name='name',
            field=models.CharField(max_length=100, unique=True, validators=[releases.validation.validate_service_name]),
        ),
    ]
