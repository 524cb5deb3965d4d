"""The page benchmark's data: many releases, runs and reports, and a history of eval runs.

Runs in the driver process (Django set up, the site's own database). Rows are written with
`bulk_create` in batches; the first eval runs are made through `evals.services` (the
runner's own path: results, summary, baseline), the rest are copies of them, so every
figure a page reads is one the real code wrote. `seed` can be called again with larger
sizes: it adds what is missing.
"""

from __future__ import annotations

import random
import uuid
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.utils import timezone

BATCH = 2_000
SEVERITIES = ("high", "medium", "low")
EVAL_TEMPLATES = 3


def _release_fields(index: int, rng: random.Random) -> dict[str, Any]:
    failed = rng.choice((0, 0, 0, 1, 2, 5))
    return {
        "version": f"v{index // 1000}.{index % 1000 // 10}.{index % 10}",
        "title": rng.choice(("Checkout", "Payments", "Search", "Login", "Reports")) + " update",
        "changes": [f"Change {n} of release {index}" for n in range(rng.randint(1, 6))],
        "test_results": {"passed": 900 + rng.randint(0, 300), "failed": failed, "skipped": 4},
        "deployment_metrics": {
            "error_rate": round(rng.uniform(0.0, 0.08), 4),
            "response_time_p95": rng.randint(180, 900),
        },
    }


def _batches(rows: list[Any]) -> list[list[Any]]:
    return [rows[i : i + BATCH] for i in range(0, len(rows), BATCH)]


def seed_releases(count: int, runs_per_release: int, rng: random.Random) -> dict[str, int]:
    from releases import stored_verdict
    from releases.models import Conversation, Release, RiskReport, RunStatus

    have = Release.objects.count()
    now = timezone.now()
    span = timedelta(days=365)
    made = {"releases": 0, "runs": 0, "reports": 0}
    for start in range(have, count, BATCH):
        indexes = range(start, min(start + BATCH, count))
        with transaction.atomic():
            releases = Release.objects.bulk_create(
                Release(created_at=now - span * (1 - i / count), **_release_fields(i, rng))
                for i in indexes
            )
            runs: list[Conversation] = []
            reports: list[RiskReport] = []
            for release in releases:
                for n in range(runs_per_release):
                    started = release.created_at + timedelta(hours=n * 6)
                    failed = rng.random() < 0.05
                    run = Conversation(
                        id=uuid.uuid4(),
                        release=release,
                        status=RunStatus.FAILED if failed else RunStatus.SUCCEEDED,
                        provider="openai-compatible",
                        model="scripted",
                        input_tokens=rng.randint(1500, 4000),
                        output_tokens=rng.randint(80, 400),
                        estimated_cost=Decimal("0.0042"),
                        error="The model provider was unreachable." if failed else "",
                        created_at=started,
                        started_at=started,
                        finished_at=started + timedelta(seconds=rng.uniform(4, 40)),
                    )
                    runs.append(run)
                    if not failed:
                        reports.append(
                            RiskReport(
                                release=release,
                                conversation=run,
                                severity=rng.choice(SEVERITIES),
                                findings=[f"Finding {k}" for k in range(rng.randint(1, 4))],
                                summary="Seeded for the page benchmark.",
                                filed_at=run.finished_at,
                            )
                        )
            for batch in _batches(runs):
                Conversation.objects.bulk_create(batch)
            for batch in _batches(reports):
                RiskReport.objects.bulk_create(batch)
        made["releases"] += len(releases)
        made["runs"] += len(runs)
        made["reports"] += len(reports)
    # bulk_create sends no signal: the releases' stored verdicts (issue 39) are written here.
    stored_verdict.refresh_all(Release.objects.filter(verdict_state="not_assessed"))
    return made


def seed_evals(count: int, trials: int) -> int:
    from evals import services
    from evals.evaluators.score import Check, Score
    from evals.evaluators.trial import TrialResult
    from evals.models import EvalResult, EvalRun
    from evals.scenario import DIMENSIONS, load_suite

    have = EvalRun.objects.count()
    if have >= count:
        return 0
    suite = load_suite()
    templates = list(EvalRun.objects.order_by("pk")[:EVAL_TEMPLATES])
    rng = random.Random(7)
    while len(templates) < min(EVAL_TEMPLATES, count):
        run = services.start_run(
            suite, trials=trials, provider="openai-compatible", model="scripted", revision="b" * 40
        )
        for scenario in suite.scenarios:
            for number in range(1, trials + 1):
                passed = rng.random() > 0.15
                scores = {
                    dimension: Score(
                        dimension=dimension,
                        value=1.0 if passed else 0.4,
                        passed=passed,
                        checks=[Check(name="severity acceptable", passed=passed)],
                    )
                    for dimension in DIMENSIONS
                }
                services.record_result(
                    run,
                    TrialResult(
                        scenario_id=scenario.id,
                        trial=number,
                        status="passed" if passed else "failed",
                        scores=scores,
                        required_dimensions=list(DIMENSIONS),
                        failure_reasons=[] if passed else ["decision_quality: severity"],
                        severity_filed=scenario.expect.severity,
                        suite_version=suite.version,
                        scenario_fingerprint=scenario.fingerprint,
                    ),
                )
        services.finish_run(run, suite=suite)
        run.refresh_from_db()
        if not templates:
            services.mark_baseline(run)
        templates.append(run)
    made = 0
    total = EvalRun.objects.count()
    while total < count:
        template = templates[total % len(templates)]
        results = list(template.results.all())
        with transaction.atomic():
            copy = EvalRun.objects.create(
                suite_version=template.suite_version,
                provider=template.provider,
                model=template.model,
                code_revision=template.code_revision,
                status=template.status,
                summary=template.summary,
                planned_trials=template.planned_trials,
                config=template.config,
                started_at=template.started_at,
                finished_at=template.finished_at,
            )
            EvalResult.objects.bulk_create(
                EvalResult(
                    run=copy,
                    scenario_id=result.scenario_id,
                    trial=result.trial,
                    scores=result.scores,
                    passed=result.passed,
                    error=result.error,
                )
                for result in results
            )
        total += 1
        made += 1
    return made


def seed(
    releases: int, runs_per_release: int = 10, eval_runs: int = 20, trials: int = 2
) -> dict[str, Any]:
    from evals.models import EvalResult, EvalRun
    from releases.models import Conversation, Release, RiskReport

    rng = random.Random(releases)
    made = seed_releases(releases, runs_per_release, rng)
    made["eval_runs"] = seed_evals(eval_runs, trials)
    middle = Release.objects.order_by("-created_at")[releases // 2 : releases // 2 + 1].get()
    latest_eval = EvalRun.objects.order_by("-created_at", "-id").first()
    return {
        "made": made,
        "counts": {
            "releases": Release.objects.count(),
            "runs": Conversation.objects.count(),
            "reports": RiskReport.objects.count(),
            "eval_runs": EvalRun.objects.count(),
            "eval_results": EvalResult.objects.count(),
        },
        "release": middle.version,
        "eval_run": latest_eval.pk if latest_eval is not None else None,
    }
