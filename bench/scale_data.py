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

import random
import uuid
from datetime import timedelta
from typing import Any

from django.db import transaction
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
    Conversation.objects.bulk_create(runs, batch_size=BATCH)
    RiskReport.objects.bulk_create(reports, batch_size=BATCH)
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
    ReviewDecision.objects.bulk_create(decisions, batch_size=BATCH)
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
            TestCase.objects.bulk_create(
                (
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
                ),
                batch_size=BATCH,
            )
        made += count
    return made


def _fill_stored_verdicts() -> int:
    try:
        from releases import stored_verdict
    except ImportError:  # the code before issue 39 recomputed the verdict on every read
        return 0
    return stored_verdict.refresh_all()
