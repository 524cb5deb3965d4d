"""A scenario made of files, ingested the way a CI job's sources are.

Before the trials, each scenario with `sources` (see `evals.scenario.SourceSet`) has its files
ingested through the `sources` services, the same path the ingestion API takes: its releases
in deploy order, each with its commits, JUnit XML reports and metrics. They go into a service
of the scenario's own, `eval-<scenario id>-<digest of its files>`, marked hidden so that the
release lists leave it out. Every ingestion is keyed by its content, so ingesting the same
files again stores nothing new (a second run of the suite reuses the releases); changed files
make a new service rather than pile new attempts onto the old releases, whose trials keep
pointing at what they were run on.

The trial then reads the ingested release as any assessment reads a real one: its summary is
derived from the detail (`sources/summary.py`), and the release API's drill-downs find it
through the trial (`evals.api_source.trial_release`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from django.db import transaction

from detective_client.records import CommitRecord, RecordError
from evals.scenario import Scenario, SourceRelease, Suite
from releases import verdicts
from releases.models import Release, Service
from sources.parsers.openmetrics import MetricsFormatError, parse_metrics_file
from sources.services import (
    IngestError,
    Origin,
    ReleaseFields,
    ingest_commits,
    ingest_junit,
    ingest_metrics_file,
    upsert_release,
)

ORIGIN = Origin(via="evals")


class ScenarioFilesError(ValueError):
    """A scenario's files could not be ingested; the message names the scenario and the file."""


@dataclass(frozen=True)
class Ingested:
    """The scenarios of a suite, those made of files with their ingested summary, and the
    release each of those was ingested into (by scenario id)."""

    suite: Suite
    releases: dict[str, int]


def service_slug(scenario: Scenario) -> str:
    assert scenario.sources is not None
    return f"eval-{scenario.id}-{scenario.sources.digest[:8]}"[:100]


def ingest_scenario(scenario: Scenario) -> Release:
    """Ingest the scenario's files (again: nothing new is stored) and return the release
    under test."""
    sources = scenario.sources
    if sources is None:
        raise ValueError(f"{scenario.id} is not made of files")
    directory = Path(sources.directory)
    slug = service_slug(scenario)
    with transaction.atomic():
        Service.objects.get_or_create(slug=slug, defaults={"name": slug, "hidden": True})
        release = None
        for source in sources.releases:
            try:
                release = _ingest_release(slug, directory, source)
            except (IngestError, RecordError, MetricsFormatError, OSError, ValueError) as exc:
                message = getattr(exc, "message", None) or str(exc)
                raise ScenarioFilesError(
                    f"{scenario.id}: release {source.version}: {message}"
                ) from exc
    assert release is not None  # a SourceSet has at least one release
    return release


def _ingest_release(service: str, directory: Path, source: SourceRelease) -> Release:
    release, _ = upsert_release(
        ReleaseFields(
            version=source.version,
            service=service,
            title=source.title,
            environment="evals",
            deployed_at=source.deployed_at,
        ),
        ORIGIN,
    )
    if source.commits is not None:
        raw = json.loads((directory / source.commits).read_text(encoding="utf-8"))
        if not isinstance(raw, list):
            raise ValueError(f"{source.commits}: expected a JSON list of commits")
        commits = [
            CommitRecord.from_json(commit, f"{source.commits}[{index}]")
            for index, commit in enumerate(raw)
        ]
        ingest_commits(release, commits, ORIGIN, file_names=[source.commits])
    for name in source.junit:
        with (directory / name).open("rb") as stream:
            ingest_junit(release, stream, name, ORIGIN)
    if source.metrics is not None:
        samples = parse_metrics_file(directory / source.metrics)
        ingest_metrics_file(release, samples, ORIGIN, file_names=[source.metrics])
    release.refresh_from_db()
    return release


def ingest_suite(suite: Suite) -> Ingested:
    """The suite with each scenario made of files ingested and carrying its release's summary
    (what the evaluators compare a report against); the others as they are."""
    scenarios: list[Scenario] = []
    releases: dict[str, int] = {}
    for scenario in suite.scenarios:
        if scenario.sources is None:
            scenarios.append(scenario)
            continue
        release = ingest_scenario(scenario)
        releases[scenario.id] = release.pk
        # Judged once here, before any trial: its metrics' judge imports scipy.stats, which
        # took longer than a trial's tool timeout when the first summary call paid for it.
        verdicts.judge_release(release)
        scenarios.append(scenario.with_ingested(release.as_summary()))
    return Ingested(suite.model_copy(update={"scenarios": scenarios}), releases)
