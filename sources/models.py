"""A release's detail as it came from its sources (git, JUnit XML, metrics), and who sent it.

The release's summary (Release.changes / test_results / deployment_metrics), which the agent
and the policy read, is derived from these rows by `sources.summary` in the same transaction as
each ingestion. Big detail stays here; the summary carries counts and a bounded list of names.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from releases.models import Release, Service


class IngestionToken(models.Model):
    """A bearer token for the ingestion API. Only its SHA-256 is stored: the token itself is
    shown once, when it is created in the admin."""

    name = models.CharField(max_length=100, help_text="Who uses it, e.g. 'CI of checkout'.")
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(
        max_length=12, editable=False, help_text="The token's first characters, to recognise it."
    )
    service = models.ForeignKey(
        Service,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="ingestion_tokens",
        help_text="Empty: the token may ingest releases of every service.",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, editable=False
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked = models.BooleanField(default=False)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    def may_ingest(self, service: Service) -> bool:
        return self.service_id is None or self.service_id == service.pk


class SourceKind(models.TextChoices):
    RELEASE = "release", "Release fields"
    COMMITS = "commits", "Commits (git)"
    JUNIT = "junit", "JUnit XML"
    METRICS = "metrics", "Metrics"


class Ingestion(models.Model):
    """One ingestion: what was sent, by whom, when, and what it counted. Keyed by the content's
    hash, so that sending the same report twice stores it once."""

    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="ingestions")
    kind = models.CharField(max_length=16, choices=SourceKind.choices)
    content_hash = models.CharField(max_length=64, help_text="SHA-256 of what was ingested.")
    token = models.ForeignKey(
        IngestionToken, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    origin = models.CharField(
        max_length=100, help_text="How it came in: api, command, admin, seed.", blank=True
    )
    file_names = models.JSONField(default=list, blank=True)
    counts = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        permissions = [("ingest_release", "Can add and correct releases and ingest their sources")]
        constraints = [
            models.UniqueConstraint(
                fields=["release", "kind", "content_hash"], name="ingestion_once_per_content"
            ),
            models.CheckConstraint(
                condition=Q(kind__in=SourceKind.values), name="ingestion_kind_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} for {self.release} at {self.created_at:%Y-%m-%d %H:%M}"


class ChangeType(models.TextChoices):
    """Conventional Commits types; OTHER for a message that does not follow them."""

    FEAT = "feat"
    FIX = "fix"
    PERF = "perf"
    REFACTOR = "refactor"
    REVERT = "revert"
    BUILD = "build"
    CI = "ci"
    CHORE = "chore"
    DOCS = "docs"
    STYLE = "style"
    TEST = "test"
    OTHER = "other"


class Commit(models.Model):
    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="commits")
    ingestion = models.ForeignKey(Ingestion, on_delete=models.CASCADE, related_name="commits")
    sha = models.CharField(max_length=64)
    author_name = models.CharField(max_length=200, blank=True)
    author_email = models.CharField(max_length=254, blank=True)
    authored_at = models.DateTimeField()
    message = models.TextField(blank=True)
    parents = models.JSONField(default=list, blank=True)
    change_type = models.CharField(max_length=16, choices=ChangeType.choices)
    scope = models.CharField(max_length=100, blank=True)
    breaking = models.BooleanField(default=False)

    class Meta:
        ordering = ["-authored_at", "sha"]
        # What an author committed before in the service (sources/history.py).
        indexes = [models.Index(fields=["author_email"], name="commit_author_email")]
        constraints = [
            models.UniqueConstraint(fields=["release", "sha"], name="commit_once_per_release"),
        ]

    def __str__(self) -> str:
        return f"{self.sha[:7]} {self.subject}"

    @property
    def subject(self) -> str:
        return self.message.split("\n", 1)[0]

    @property
    def description(self) -> str:
        """The subject without its Conventional Commits header (shown beside the type)."""
        if self.change_type == ChangeType.OTHER:
            return self.subject
        return self.subject.split(": ", 1)[-1]

    @property
    def is_merge(self) -> bool:
        return len(self.parents) > 1


class CommitFile(models.Model):
    commit = models.ForeignKey(Commit, on_delete=models.CASCADE, related_name="files")
    path = models.CharField(max_length=1000)
    old_path = models.CharField(max_length=1000, blank=True, help_text="Before a rename.")
    added = models.PositiveIntegerField(null=True, blank=True, help_text="Empty for binary.")
    deleted = models.PositiveIntegerField(null=True, blank=True, help_text="Empty for binary.")
    binary = models.BooleanField(default=False)
    # What the git reader found at the release's head (detective_client/generated.py); False
    # from a client older than the flags, and then the path alone says what the file is.
    generated = models.BooleanField(
        default=False, help_text="A generator's header or linguist-generated at the head."
    )
    vendored = models.BooleanField(default=False, help_text="linguist-vendored at the head.")
    removed = models.BooleanField(default=False, help_text="The commit deleted the file.")
    # The line ranges the commit changed in the file, `git diff -U0` headers as
    # [old_start, old_count, new_start, new_count] (detective_client.hunks); null when none
    # were sent (an older client, `manage.py ingest`, a binary, lock or generated file).
    hunks = models.JSONField(null=True, blank=True)

    def __str__(self) -> str:
        return self.path


class ReleaseHead(models.Model):
    """What ranking a failure's suspects needs from the release's head, sent by the CI client
    with the commits (`detective_client.records.HeadRecord`): its test files' import names, the
    blame of the paths the range changed and the functions of the Python ones. The latest sent
    replaces the one before."""

    release = models.OneToOneField(Release, on_delete=models.CASCADE, related_name="head_facts")
    sha = models.CharField(max_length=64)
    tests = models.JSONField(default=dict, blank=True)
    blame = models.JSONField(default=dict, blank=True)
    scopes = models.JSONField(default=dict, blank=True)
    truncated = models.BooleanField(default=False)
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"head {self.sha[:9]} of {self.release}"


class TestStatus(models.TextChoices):
    __test__ = False
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    SKIPPED = "skipped"
    # Passed on a rerun after failing (Surefire's flakyFailure).
    FLAKY = "flaky"


class TestCase(models.Model):
    """One attempt of one invocation of one test. A test is its suite, class and name; each
    `<testcase>` element of a report is an invocation (the same test twice in one report, as
    TestNG writes a data-driven test, is two); a rerun (marked so in the report, or a later
    report of the release) is a new attempt of the same invocation."""

    __test__ = False  # a model, whatever pytest thinks of its name

    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="test_cases")
    ingestion = models.ForeignKey(Ingestion, on_delete=models.CASCADE, related_name="test_cases")
    suite = models.CharField(max_length=500, blank=True)
    classname = models.CharField(max_length=500, blank=True)
    name = models.CharField(max_length=1000)
    file = models.CharField(max_length=1000, blank=True)
    status = models.CharField(max_length=8, choices=TestStatus.choices)
    duration = models.FloatField(null=True, blank=True, help_text="Seconds.")
    failure_type = models.CharField(max_length=500, blank=True)
    failure_message = models.TextField(blank=True)
    # The failure's text (a traceback, a stack trace), bounded by the parser
    # (sources.parsers.junit.MAX_TRACEBACK_CHARS: head and tail kept).
    traceback = models.TextField(blank=True)
    # A failure's suspect commits, most likely first, with its frames and their changed lines
    # ({"ranked", "frames", "lines"}: sources/services/suspects.py stored_form; at most
    # MAX_SUSPECTS): computed where a checkout is at hand; null when none was (the JUnit
    # ingestion writes its rows by raw INSERT, so no default of Django's applies).
    suspects = models.JSONField(null=True, blank=True)
    invocation = models.PositiveIntegerField(default=1)
    attempt = models.PositiveIntegerField(default=1)

    class Meta:
        ordering = ["suite", "classname", "name", "invocation", "attempt"]
        constraints = [
            models.UniqueConstraint(
                fields=["release", "suite", "classname", "name", "invocation", "attempt"],
                name="testcase_attempt_once",
            ),
            models.CheckConstraint(
                condition=Q(status__in=TestStatus.values), name="testcase_status_valid"
            ),
        ]
        # The release page lists one status at a time in name order, a page at a time: with
        # 100,000 cases on a release, this index serves the filter, the order and the count.
        indexes = [
            models.Index(
                fields=["release", "status", "suite", "classname", "name", "attempt"],
                name="testcase_release_status_name",
            ),
            # A test's history across the service's releases (sources/history.py).
            models.Index(fields=["name", "status"], name="testcase_name_status"),
        ]

    def __str__(self) -> str:
        return f"{self.classname}::{self.name} #{self.attempt} {self.status}"

    @property
    def label(self) -> str:
        return f"{self.classname}::{self.name}" if self.classname else self.name


class MetricWindow(models.TextChoices):
    RELEASE = "release"
    BASELINE = "baseline"


class MetricSample(models.Model):
    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="metric_samples")
    ingestion = models.ForeignKey(
        Ingestion, on_delete=models.CASCADE, related_name="metric_samples"
    )
    name = models.CharField(max_length=200)
    timestamp = models.DateTimeField(null=True, blank=True, help_text="Empty: not stamped.")
    value = models.FloatField(null=True, blank=True, help_text="Empty: missing (NaN, Inf).")
    labels = models.JSONField(default=dict, blank=True)
    window = models.CharField(max_length=8, choices=MetricWindow.choices)

    class Meta:
        ordering = ["name", "timestamp"]
        constraints = [
            models.CheckConstraint(
                condition=Q(window__in=MetricWindow.values), name="metricsample_window_valid"
            ),
        ]
        indexes = [
            models.Index(fields=["release", "window", "name"], name="metricsample_release_name")
        ]

    def __str__(self) -> str:
        return f"{self.name}={self.value} at {self.timestamp:%Y-%m-%d %H:%M}"
