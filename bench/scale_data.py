"""The scale benchmark's data (issue 39): a real team's size, written fast.

10,000 releases over 5 services, 10 runs each (100,000), a report for nineteen runs in twenty
(~95,000), a person's decision on some latest reports, and 100,000 test cases (1,000 of them on
the release whose page is timed). Rows go in with `bulk_create` in large batches inside one
transaction per batch (no signal, no per-row validation: the loader writes what the real
writers would have written). Once loaded, the releases' stored verdicts are filled by the
same bulk refresh the data migration uses, when the code has one (before issue 39 it had not).

Runs inside a Django process pointed at the benchmark's own database.
"""

from __future__ import annotations

import json
import random
import uuid
from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

BATCH = 5_000
SERVICES = 5
RUNS_PER_RELEASE = 10
PAGE_RELEASE = "v-page"  # the release page timed, with 1,000 test cases
PAGE_CASES = 1_000
SEVERITIES = ("high", "medium", "low")


def load(releases: int, test_cases: int, seed: int = 39) -> dict[str, Any]:
    from django.contrib.auth import get_user_model

    from releases.models import RiskPolicy, Service

    rng = random.Random(seed)
    services = Service.objects.bulk_create(
        Service(name=f"Service {n}", slug=f"service-{n}") for n in range(SERVICES)
    )
    policy = RiskPolicy.objects.order_by("-version").first()
    if policy is None:
        policy = RiskPolicy.objects.create(version=1, thresholds={})
    reviewer = get_user_model().objects.create_user("scale-reviewer")
    counts = {"releases": 0, "runs": 0, "reports": 0, "decisions": 0, "test_cases": 0}
    now = timezone.now()
    for start in range(0, releases, BATCH // RUNS_PER_RELEASE):
        end = min(start + BATCH // RUNS_PER_RELEASE, releases)
        with transaction.atomic():
            _batch(range(start, end), releases, services, policy, reviewer, rng, now, counts)
    counts["test_cases"] = _test_cases(test_cases, rng)
    counts["stored_verdicts"] = _fill_stored_verdicts()
    return counts


def _release(index: int, total: int, service: Any, rng: random.Random, now: Any) -> Any:
    from releases.models import Release

    failed = rng.choice((0, 0, 0, 1, 2, 5))
    missing_metrics = rng.random() < 0.03
    return Release(
        service=service,
        version=PAGE_RELEASE if index == 0 else f"v{index // 100}.{index % 100}.0",
        title=rng.choice(("Checkout", "Payments", "Search", "Login", "Reports")) + " update",
        changes=[f"Change {n} of release {index}" for n in range(rng.randint(1, 6))],
        test_results={"passed": 900 + rng.randint(0, 300), "failed": failed, "skipped": 4},
        deployment_metrics=None
        if missing_metrics
        else {
            "error_rate": round(rng.uniform(0.0, 0.08), 4),
            "response_time_p95": rng.randint(180, 900),
        },
        created_at=now - timedelta(days=365) * (1 - index / total),
    )


def _batch(
    indexes: range,
    total: int,
    services: list[Any],
    policy: Any,
    reviewer: Any,
    rng: random.Random,
    now: Any,
    counts: dict[str, int],
) -> None:
    from releases.models import Conversation, Release, ReviewDecision, RiskReport, RunStatus

    made = Release.objects.bulk_create(
        _release(i, total, services[i % SERVICES], rng, now) for i in indexes
    )
    runs: list[Conversation] = []
    reports: list[RiskReport] = []
    latest: list[RiskReport] = []
    for release in made:
        last_report = None
        for n in range(RUNS_PER_RELEASE):
            at = release.created_at + timedelta(hours=n)
            ok = rng.random() < 0.95
            run = Conversation(
                id=uuid.uuid4(),
                release=release,
                status=RunStatus.SUCCEEDED if ok else RunStatus.FAILED,
                provider="scripted",
                model="bench",
                created_at=at,
                started_at=at,
                finished_at=at + timedelta(seconds=30),
                error="" if ok else "The model server went away.",
                outcome="filed" if ok else "no_report",
            )
            runs.append(run)
            if not ok:
                continue
            severity = rng.choice(SEVERITIES)
            policy_severity = rng.choice((severity, severity, severity, *SEVERITIES))
            last_report = RiskReport(
                release=release,
                conversation=run,
                severity=severity,
                policy=policy,
                policy_severity=policy_severity,
                findings=[f"Finding of run {n}"],
                summary="Bench report.",
                filed_at=at + timedelta(seconds=29),
                needs_review=policy_severity != severity,
                review_reasons=["The model and the policy disagree."]
                if policy_severity != severity
                else [],
            )
            reports.append(last_report)
        if last_report is not None:
            latest.append(last_report)
    fast_insert(Conversation, runs)
    fast_insert(RiskReport, reports)
    decisions = [
        ReviewDecision(
            report=report,
            reviewer=reviewer,
            decision="override",
            severity=rng.choice(SEVERITIES),
            reason="Bench override.",
            model_severity=report.severity,
            policy_severity=report.policy_severity,
            created_at=report.filed_at + timedelta(minutes=5),
        )
        for report in latest
        if report.needs_review and rng.random() < 0.5
    ]
    fast_insert(ReviewDecision, decisions)
    counts["releases"] += len(made)
    counts["runs"] += len(runs)
    counts["reports"] += len(reports)
    counts["decisions"] += len(decisions)


def _test_cases(total: int, rng: random.Random) -> int:
    """`total` test cases: PAGE_CASES on the timed release, the rest 1,000 a release on the
    releases after it (a failure in every 50)."""
    from releases.models import Release
    from sources.models import Ingestion, TestCase

    wanted = -(-total // PAGE_CASES)
    releases = list(Release.objects.order_by("created_at", "id").values_list("pk", flat=True))
    made = 0
    for index, release_id in enumerate(releases[:wanted]):
        count = min(PAGE_CASES, total - made)
        with transaction.atomic():
            ingestion = Ingestion.objects.create(
                release_id=release_id, kind="junit", content_hash=f"bench-{index}", origin="bench"
            )
            fast_insert(
                TestCase,
                [
                    TestCase(
                        release_id=release_id,
                        ingestion=ingestion,
                        suite="bench",
                        classname=f"tests.test_module_{n // 100}",
                        name=f"test_case_{n}",
                        status="failed" if n % 50 == 7 else "passed",
                        duration=round(rng.uniform(0.001, 2.0), 3),
                        failure_message="assert 1 == 2" if n % 50 == 7 else "",
                    )
                    for n in range(count)
                ],
            )
        made += count
    return made


def fast_insert(model: Any, rows: list[Any]) -> None:
    """INSERT the rows with one `executemany` per batch, each value converted once by its
    field's kind: `bulk_create` spent most of its time preparing 500,000 values field by
    field. Rows of a model whose ids the database assigns get them back from the first id
    (one writer: the benchmark's own database)."""
    if not rows:
        return
    fields = [f for f in model._meta.concrete_fields if not (f.primary_key and f.auto_created)]
    pairs = [(field, _converter(field)) for field in fields]
    columns = ", ".join(connection.ops.quote_name(field.column) for field in fields)
    marks = ", ".join(["%s"] * len(fields))
    table = connection.ops.quote_name(model._meta.db_table)
    sql = f"INSERT INTO {table} ({columns}) VALUES ({marks})"
    with connection.cursor() as cursor:
        for start in range(0, len(rows), BATCH):
            batch = rows[start : start + BATCH]
            cursor.executemany(
                sql,
                [[conv(getattr(row, field.attname)) for field, conv in pairs] for row in batch],
            )
    if model._meta.pk.auto_created:
        pk_column = model._meta.pk.column
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT MAX({pk_column}) FROM {table}")
            last = cursor.fetchone()[0]
        for offset, row in enumerate(rows):
            row.pk = last - len(rows) + 1 + offset


def _converter(field: Any) -> Any:
    kind = (field.target_field if field.is_relation else field).get_internal_type()
    if kind == "JSONField":
        return lambda value: None if value is None else json.dumps(value)
    if kind == "UUIDField":
        if connection.vendor == "postgresql":
            return lambda value: value
        return lambda value: None if value is None else value.hex
    if kind == "DateTimeField":
        return connection.ops.adapt_datetimefield_value
    return lambda value: value


def _fill_stored_verdicts() -> int:
    try:
        from releases import stored_verdict
    except ImportError:  # the code before issue 39 recomputed the verdict on every read
        return 0
    return stored_verdict.refresh_all()
