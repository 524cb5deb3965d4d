"""The models and their migrations say the same: a change to a model without its migration
would leave a database that the code does not describe (and `migrate` would not fix it)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_no_model_change_is_without_its_migration() -> None:
    out = StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit as exit_:  # --check exits 1 when a migration is missing
        pytest.fail(f"makemigrations --check exited {exit_.code}:\n{out.getvalue()}")
    assert "No changes detected" in out.getvalue()
