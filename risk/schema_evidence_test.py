"""A failure on the schema ranks the release's schema changes: the only one first, several
after the changes a frame runs through, and its critical area said."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from risk.history import TestHistory
from risk.policy import PolicySettings
from risk.schema_evidence import schema_error, shared_words
from risk.suspect_signals import suspect_signals
from risk.suspects import ON_PATH, SCHEMA, UNDER_TEST, Failure, RangeCommit, rank_suspects


@dataclass(frozen=True)
class H:
    old_start: int
    old_count: int
    new_start: int
    new_count: int


@dataclass(frozen=True)
class F:
    path: str
    hunks: tuple[H, ...] = (H(1, 0, 1, 5),)
    old_path: str | None = None


@dataclass(frozen=True)
class Fr:
    path: str
    line: int
    function: str = ""
    in_repo: bool = True


def _c(sha: str, *files: F, automated: bool = False) -> RangeCommit:
    return RangeCommit(sha, f"subject {sha}", "Mira Holt", files, automated)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            'psycopg.errors.NotNullViolation: null value in column "currency" of relation '
            '"shop_order" violates not-null constraint',
            'null value in column "currency" of relation "shop_order" violates not-null constraint',
        ),
        (
            "django.db.utils.OperationalError: no such column: shop_order.currency",
            "no such column: shop_order.currency",
        ),
        (
            "sqlite3.IntegrityError: NOT NULL constraint failed: orders.currency",
            "NOT NULL constraint failed: orders.currency",
        ),
        (
            'psycopg2.errors.UndefinedColumn: column "sku" does not exist',
            'column "sku" does not exist',
        ),
        ("django.db.utils.IntegrityError: duplicate key", "IntegrityError"),
        ("AssertionError: assert 3 == 4", ""),
        ("KeyError: 'column'", ""),
    ],
)
def test_a_schema_error_is_read_in_each_databases_words(text: str, said: str) -> None:
    assert schema_error(text) == said


def test_the_words_a_migrations_name_shares_with_the_error() -> None:
    error = "NOT NULL constraint failed: shop_order.currency"
    assert shared_words(error, "shop/migrations/0042_order_currency.py") == ["currency", "order"]
    assert shared_words(error, "shop/migrations/0041_auto_20261101.py") == []


MODELS = "shop/models.py"
TEST = "shop/tests/test_orders.py"


def _failure(error: str = "NOT NULL constraint failed: shop_order.currency") -> Failure:
    return Failure(
        test_path=TEST,
        frames=[Fr(TEST, 12, "test_total"), Fr("shop/conftest.py", 8, "db")],
        exercised=frozenset({MODELS}),
        distances={MODELS: 1},
        schema_error=error,
    )


def test_the_only_schema_change_is_first_and_says_why() -> None:
    commits = [
        _c("newer", F(MODELS)),  # the module the test imports: "code under test"
        _c("migration", F("shop/migrations/0042_order_currency.py"), F("shop/admin.py")),
        _c("bump", F("shop/migrations/0041_vendor.py"), automated=True),
    ]
    ranked = rank_suspects(_failure(), commits)
    assert [(s.sha, s.tier) for s in ranked] == [("migration", SCHEMA), ("newer", UNDER_TEST)]
    assert ranked[0].path == "shop/migrations/0042_order_currency.py"
    assert ranked[0].reason == (
        "migration 'subject migration' changed the schema "
        "(shop/migrations/0042_order_currency.py) and the test fails on it (NOT NULL "
        "constraint failed: shop_order.currency); its file names currency, order; the "
        "release's only schema change; first, ahead of newer 'subject newer', as a schema "
        "error points at the schema first"
    )
    # Without a schema error the migration is no suspect of this failure.
    plain = rank_suspects(_failure(error=""), commits)
    assert [s.sha for s in plain] == ["newer"]


def test_several_schema_changes_follow_the_path_and_the_one_naming_the_column_leads() -> None:
    commits = [
        _c("other", F("shop/migrations/0043_vendor_name.py")),
        _c("onpath", F("shop/conftest.py", (H(6, 1, 6, 4),))),
        _c("currency", F("shop/migrations/0042_order_currency.py")),
        _c("newer", F(MODELS)),
    ]
    ranked = rank_suspects(_failure(), commits)
    assert [(s.sha, s.tier) for s in ranked] == [
        ("onpath", ON_PATH),
        ("currency", SCHEMA),
        ("other", SCHEMA),
        ("newer", UNDER_TEST),
    ]
    assert "; its file names currency, order" in ranked[1].reason
    assert "only schema change" not in ranked[1].reason


def test_a_failure_whose_first_suspect_is_a_migration_is_in_a_critical_area() -> None:
    commits = [
        _c("newer", F(MODELS)),
        _c("migration", F("shop/migrations/0042_order_currency.py")),
    ]
    ranked = rank_suspects(_failure(), commits)
    test = TestHistory(
        label="shop.tests.test_orders::test_total",
        file=TEST,
        suite="",
        outcome="failed",
        flaky_here=False,
        suspects=tuple(ranked),
        suspects_computed=True,
    )
    signals = {s.name: s for s in suspect_signals([test], PolicySettings())}
    critical = signals["suspect_in_critical_area"]
    assert critical.level == "high"
    assert "migrations" in critical.areas
    assert "shop/migrations/0042_order_currency.py is in migrations" in critical.detail
