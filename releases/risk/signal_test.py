"""Critical areas read from change titles, commit messages and changed paths."""

from __future__ import annotations

import pytest

from releases.risk.settings import PolicySettings
from releases.risk.signal import change_areas, path_areas

CFG = PolicySettings()


@pytest.mark.parametrize(
    ("text", "areas"),
    [
        # The demo's v2.3.0: no keyword of an area, yet a database upgrade and a schema change.
        ("Upgraded the primary database from PostgreSQL 13 to 16", ["migrations"]),
        ("Dropped the unused orders.legacy_status column", ["migrations"]),
        ("chore: drop orders.legacy_status\n\nALTER TABLE orders", ["migrations"]),
        ("Migrate MySQL to 8.0", ["migrations"]),
        ("Renamed the index on invoices.customer_id", ["migrations", "payments"]),
        ("Database migration: add NOT NULL constraint to accounts.email", ["migrations"]),
        # Near misses stay out.
        ("Add column chooser to CSV export", []),
        ("Align search table columns", []),
        ("Upgrade message queue client", []),
        ("Move search constants into settings", []),
        ("Fixed typos on the receipt email", []),
    ],
)
def test_change_areas(text: str, areas: list[str]) -> None:
    assert change_areas(text, CFG) == areas


@pytest.mark.parametrize(
    ("path", "areas"),
    [
        ("db/migrations/0042_drop_legacy_status.sql", ["migrations"]),
        ("orders/migrations/0007_auto.py", ["migrations"]),
        ("migrations/0001_initial.py", ["migrations"]),
        ("prisma/schema.prisma", ["migrations"]),
        ("sql/reports.SQL", ["migrations"]),
        ("src/payments/gateway.py", ["payments"]),
        ("src/auth/session.py", ["auth"]),
        ("docs/getting-started.md", []),
        ("src/search/ranking.py", []),
    ],
)
def test_path_areas(path: str, areas: list[str]) -> None:
    assert path_areas(path, CFG) == areas


def test_the_patterns_and_globs_are_settings() -> None:
    cfg = PolicySettings(schema_change_patterns=[], critical_paths={"infra": ["deploy/*"]})
    assert change_areas("Dropped the unused orders.legacy_status column", cfg) == []
    assert path_areas("deploy/k8s.yaml", cfg) == ["infra"]
    assert path_areas("db/0042_drop.sql", cfg) == []
    with pytest.raises(ValueError, match="not a regular expression"):
        PolicySettings(schema_change_patterns=["(unclosed"])
