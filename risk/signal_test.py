"""Critical areas read from change titles, commit messages and changed paths."""

from __future__ import annotations

import pytest

from risk.policy import evaluate
from risk.settings import PolicySettings
from risk.signal import PolicyVerdict, Signal, change_areas, path_areas

CFG = PolicySettings()


@pytest.mark.parametrize(
    ("text", "areas"),
    [
        # The demo's v2.3.0: no keyword of an area, yet a database upgrade and a schema change.
        ("Upgraded the primary database from PostgreSQL 13 to 16", ["migrations"]),
        ("Dropped the unused orders.legacy_status column", ["migrations"]),
        # The subject alone is read: a body's prose and trailers are never content.
        ("chore: drop orders.legacy_status\n\nALTER TABLE orders", []),
        ("Migrate MySQL to 8.0", ["migrations"]),
        # Whole words or their plurals: "invoices" is "invoice", "payload" is not "pay".
        ("Renamed the index on invoices.customer_id", ["migrations", "payments"]),
        ("Trim the payload", []),
        ("Fix the invoice rounding", ["payments"]),
        ("Fix authentication bug", ["auth"]),
        # Words inside other words, trailers and bots' bumps name no area.
        ("Keep CaptureMode when re-reading", []),
        ("Tidy the tokenizer\n\nCo-authored-by: Ann <ann@example.com>", []),
        ("Bump actions/checkout from 2 to 3", []),
        ("build(deps): bump cookie-session from 2.1.0 to 2.1.1", []),
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
        # Tests, docs, CI and examples lie in no area: only code does.
        ("tests/auth/test_login.py", []),
        ("examples/auth/index.js", []),
        ("docs/payments/refunds.md", []),
        (".github/workflows/checkout.yml", []),
        ("src/requests/sessions.py", []),
        ("src/search/ranking.py", []),
    ],
)
def test_path_areas(path: str, areas: list[str]) -> None:
    assert path_areas(path, CFG) == areas


def test_the_patterns_and_globs_are_settings() -> None:
    cfg = PolicySettings(
        schema_change_patterns=[],
        critical_paths={"infra": ["deploy/*"]},
        change_area_paths={"payments": ["src/money/*"]},
    )
    assert change_areas("Dropped the unused orders.legacy_status column", cfg) == []
    assert path_areas("deploy/k8s.py", cfg) == ["infra"]
    assert path_areas("src/money/charge.py", cfg) == ["payments"]
    assert path_areas("src/payments/charge.py", cfg) == []
    assert path_areas("db/0042_drop.sql", cfg) == []
    with pytest.raises(ValueError, match="not a regular expression"):
        PolicySettings(schema_change_patterns=["(unclosed"])


def _payment_release(failing: list[str], changes: list[str]) -> dict[str, object]:
    return {
        "changes": changes,
        "tests": {"passed": 100, "failed": len(failing), "skipped": 0, "failing_tests": failing},
        "deployment_metrics": {"error_rate": 0.07, "response_time_p95": 300},
    }


def test_the_evidence_leaves_out_a_sentence_another_says_with_more() -> None:
    release = _payment_release(
        ["test_payment_capture", "test_button_colours"],
        ["Rewrite payment processing", "Update button styles"],
    )
    verdict = evaluate(release, CFG)
    names = {s.name for s in verdict.signals}
    assert {"failed_tests", "risky_changes"} <= names  # the report keeps both signals

    evidence = verdict.evidence()

    assert evidence == [
        "1 failing test in payments: test_payment_capture",
        "1 change in payments and 2 failed tests",
        "Error rate 7 %, above the 5 % limit for high",
    ]


def test_without_the_fuller_sentence_the_shorter_one_stays() -> None:
    release = _payment_release(["test_button_styles"], ["Update button styles"])

    evidence = evaluate(release, CFG).evidence()

    assert "1 failed test: test_button_styles" in evidence


def test_the_historys_reassurance_can_be_left_to_a_release_nothing_raises() -> None:
    rate = Signal("error_rate", "Error rate", "high", True, detail="Error rate 9 %")
    judge = Signal("metric_judge", "Metrics", "none", False, detail="p95 within the allowed")
    raised = PolicyVerdict("high", (rate, judge))
    calm = PolicyVerdict("low", (judge,))

    assert raised.evidence() == ["Error rate 9 %", "p95 within the allowed"]
    assert raised.evidence(always_cited=False) == ["Error rate 9 %"]
    assert calm.evidence(always_cited=False) == ["p95 within the allowed"]
