"""A scenario made of files, ingested the way a CI job's sources are.

Before the trials, each scenario with `sources` (see `evals.scenario.SourceSet`) has its files
ingested through the `sources` services, the same path the ingestion API takes: its releases
in deploy order, each with its commits, JUnit XML reports, metrics and OTLP traces (those
through the `traces` app's reading and merge). They go into a service of the scenario's own,
`eval-<scenario id>-<digest of its files>`, marked hidden so that the release lists leave it
out. Every ingestion is keyed by its content, so ingesting the same
files again stores nothing new (a second run of the suite reuses the releases); changed files
make a new service rather than pile new attempts onto the old releases, whose trials keep
pointing at what they were run on.

A scenario made of a git history (`history`: per release, a folder of `git format-patch`
files) is replayed into a repository of its own in a temporary folder (`evals/scenario_git.py`)
and each release's range is ingested from it as `manage.py ingest --git-repo R --git-range A..B
--junit ...` does: the commits read by `git log`, the reports, then the suspects of every failed
test ranked with the checkout at hand (`sources.services.suspects.compute_suspects`), so the
policy's evidence names the first suspect of each new failure as it does for a real release.

The trial then reads the ingested release as any assessment reads a real one: its summary is
derived from the detail (`sources/summary.py`), and the release API's drill-downs find it
through the trial (`evals.api_source.trial_release`).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from django.db import transaction

from detective_client import git
from detective_client.records import CommitRecord, RecordError
from evals import scenario_git
from evals.scenario import Culprit, Scenario, SourceRelease, Suite
from releases.models import Release, Service
from sources import judging
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
from sources.services.suspects import compute_suspects
from traces.models import TraceIntake
from traces.otlp.reading import BodyError, decode_traces
from traces.otlp.spans import read_spans
from traces.services import ingest_into

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
    with tempfile.TemporaryDirectory(prefix=f"eval-{scenario.id}-") as scratch:
        ranges: dict[str, str] = {}
        repo = Path(scratch) / "repo"
        if sources.has_history:
            try:
                ranges = scenario_git.build(directory, sources.releases, repo)
            except scenario_git.HistoryError as exc:
                raise ScenarioFilesError(f"{scenario.id}: {exc}") from exc
        with transaction.atomic():
            Service.objects.get_or_create(slug=slug, defaults={"name": slug, "hidden": True})
            release = None
            for source in sources.releases:
                checkout = (repo, ranges[source.version]) if source.version in ranges else None
                try:
                    release = _ingest_release(slug, directory, source, checkout)
                except (
                    IngestError,
                    RecordError,
                    MetricsFormatError,
                    git.GitError,
                    OSError,
                    ValueError,
                ) as exc:
                    message = getattr(exc, "message", None) or str(exc)
                    raise ScenarioFilesError(
                        f"{scenario.id}: release {source.version}: {message}"
                    ) from exc
    assert release is not None  # a SourceSet has at least one release
    return release


def culprit_of(scenario: Scenario, release: Release) -> Culprit | None:
    """The commit of the release under test that the scenario's `expect.culprit` names (its
    subject, or a short sha of 7 hex digits or more); None when it declares none. A rule that
    names no commit, or several, is the scenario's mistake, said before any trial runs."""
    rule = scenario.expect.culprit
    if rule is None:
        return None
    wanted = " ".join(rule.split()).casefold()
    found = [
        commit
        for commit in release.commits.all()
        if " ".join(commit.subject.split()).casefold() == wanted
        or (len(wanted) >= 7 and commit.sha.startswith(wanted))
    ]
    if len(found) != 1:
        what = "no commit" if not found else f"{len(found)} commits"
        raise ScenarioFilesError(
            f"{scenario.id}: expect.culprit {rule!r} names {what} of {release.version}"
        )
    return Culprit(sha=found[0].sha, subject=found[0].subject)


def _ingest_release(
    service: str, directory: Path, source: SourceRelease, checkout: tuple[Path, str] | None
) -> Release:
    repo, rev_range = checkout if checkout is not None else (None, None)
    start, end = git.split_range(rev_range) if rev_range else (None, None)
    release, _ = upsert_release(
        ReleaseFields(
            version=source.version,
            service=service,
            title=source.title,
            environment="evals",
            deployed_at=source.deployed_at,
            # As `manage.py ingest --git-repo` records them.
            git_from_ref=(start or "") if repo is not None else None,
            git_to_ref=end,
            head_sha=git.resolve(repo, end) if repo is not None and end else None,
        ),
        ORIGIN,
    )
    if repo is not None and rev_range is not None:
        ingest_commits(release, git.read_range(repo, rev_range), ORIGIN, file_names=[rev_range])
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
    if repo is not None and rev_range is not None:
        # The checkout is at hand only here, as in `manage.py ingest`: rank the suspects now.
        compute_suspects(release, repo, rev_range)
    if source.metrics is not None:
        samples = parse_metrics_file(directory / source.metrics)
        ingest_metrics_file(release, samples, ORIGIN, file_names=[source.metrics])
    if source.traces is not None:
        _ingest_traces(release, directory / source.traces)
    release.refresh_from_db()
    return release


def _ingest_traces(release: Release, path: Path) -> None:
    """The file's spans through the OTLP path's reading and merge (`traces`), into the
    scenario's own service whatever service name the file gives. Ingesting it again adds
    nothing when the release already has spans (the figures are sums, not keyed by content)."""
    if TraceIntake.objects.filter(release=release).exists():
        return
    try:
        read = read_spans(decode_traces(path.read_bytes(), "application/json"))
    except BodyError as exc:
        raise ScenarioFilesError(f"{path.name}: {exc.message}") from None
    if read.rejected:
        raise ScenarioFilesError(f"{path.name}: {read.message()}")
    ingest_into(release.service, read)
    if read.rejected:
        raise ScenarioFilesError(f"{path.name}: {read.message()}")


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
        judging.judge_release(release)
        scenarios.append(
            scenario.with_ingested(release.as_summary(), culprit_of(scenario, release))
        )
    return Ingested(suite.model_copy(update={"scenarios": scenarios}), releases)
