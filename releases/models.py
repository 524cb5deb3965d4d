"""Releases, the agent runs that assess them, and the risk reports they file.

Over 600 lines on purpose: one schema whose constraints reach across its tables (a release's
service, its runs, their reports and decisions); the detail of a release lives in `sources`.

Release data may be incomplete: a JSON field that is NULL means "missing", never zero, and the
agent is expected to cope with it. Conversations, Messages and AgentEvents are the durable
record of one agent run; a page can rebuild (replay) a run from them alone.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from releases.choices import AssessmentOutcome as AssessmentOutcome
from releases.choices import ReportOrigin as ReportOrigin
from releases.choices import RunStatus as RunStatus
from releases.choices import Severity as Severity
from releases.schemas import (
    KNOWN_METRICS,
    validate_changes,
    validate_deployment_metrics,
    validate_findings,
    validate_test_results,
)
from releases.stored_data import StoredListDecoder, StoredObjectDecoder
from releases.validation import (
    VERSION_FORMAT,
    VERSION_MAX_LENGTH,
    validate_plain_text,
    validate_service_name,
    validate_version,
)
from releases.verdict_columns import VerdictColumns
from risk.own_words import own_findings

# The service that releases belong to when nobody names one: the demo's, and every release typed
# in by hand. Its releases keep the short addresses (/releases/<version>/).
DEFAULT_SERVICE_SLUG = "default"
DEFAULT_SERVICE_NAME = "Default service"


class Service(models.Model):
    """What is released: a release is identified by its service and its version."""

    name = models.CharField(max_length=100, unique=True, validators=[validate_service_name])
    slug = models.SlugField(max_length=100, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    hidden = models.BooleanField(
        default=False,
        help_text="Left out of the release lists and counts: a service the evals made for a "
        "scenario's files (evals/scenario_sources.py), not one anybody releases.",
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_default(self) -> bool:
        return self.slug == DEFAULT_SERVICE_SLUG

    @classmethod
    def default(cls) -> Service:
        service, _ = cls.objects.get_or_create(
            slug=DEFAULT_SERVICE_SLUG, defaults={"name": DEFAULT_SERVICE_NAME}
        )
        return service


def default_service_id() -> int:
    """The default for Release.service: a release created without a service is the default
    service's (made on first use, should its data migration's row have been deleted).

    Its id is read alone: migrations older than a Service column call this too (remaking the
    release table), when the table does not have that column yet."""
    found = Service.objects.filter(slug=DEFAULT_SERVICE_SLUG).values_list("pk", flat=True).first()
    return found if found is not None else Service.default().pk


DATA_FIELDS = ("changes", "test_results", "deployment_metrics")


class Release(VerdictColumns):
    service = models.ForeignKey(
        Service,
        on_delete=models.PROTECT,
        related_name="releases",
        default=default_service_id,
    )
    version = models.CharField(
        max_length=VERSION_MAX_LENGTH,
        validators=[validate_version],
        help_text=f"e.g. v2.1.0 or 1.0.0-rc.1: {VERSION_FORMAT}.",
    )
    title = models.CharField(max_length=200, blank=True, validators=[validate_plain_text])
    # The data fields read through StoredJSONDecoder (releases/stored_data.py): whatever an
    # old row holds, a value that cannot be read comes back as missing (None), not a 500.
    changes = models.JSONField(
        null=True,
        blank=True,
        decoder=StoredListDecoder,
        validators=[validate_changes],
        help_text='A list of change descriptions, e.g. ["Added payment processing"]. '
        "Empty means missing.",
    )
    test_results = models.JSONField(
        null=True,
        blank=True,
        decoder=StoredObjectDecoder,
        validators=[validate_test_results],
        help_text='e.g. {"passed": 142, "failed": 2, "skipped": 5, "failing_tests": ["..."]}. '
        "Empty means missing.",
    )
    deployment_metrics = models.JSONField(
        null=True,
        blank=True,
        decoder=StoredObjectDecoder,
        validators=[validate_deployment_metrics],
        help_text='e.g. {"error_rate": 0.02, "response_time_p95": 450} (p95 in ms). '
        f"Known metrics: {KNOWN_METRICS}. Empty means missing.",
    )
    # Where the release came from; all optional (a release typed in by hand has none of it).
    environment = models.CharField(max_length=64, blank=True, help_text="e.g. production, staging.")
    git_from_ref = models.CharField(
        "git from", max_length=255, blank=True, help_text="The range's start, e.g. v2.0.0."
    )
    git_to_ref = models.CharField(
        "git to", max_length=255, blank=True, help_text="The range's end, e.g. v2.1.0."
    )
    head_sha = models.CharField(
        "head SHA",
        max_length=64,
        blank=True,
        validators=[RegexValidator(r"\A[0-9a-f]{7,64}\Z", "A SHA is 7 to 64 hex digits.")],
    )
    pipeline_url = models.URLField("pipeline run", max_length=500, blank=True)
    deployed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta(VerdictColumns.Meta):
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["service", "version"],
                name="release_unique_service_version",
                violation_error_message="This service already has a release of this version.",
            ),
        ]

    def __str__(self) -> str:
        return self.version

    def save(self, *args: Any, **kwargs: Any) -> None:
        """Saved only when the fields pass their validation: the admin, seed_demo, ingestion
        and any script go through the same rules as `full_clean` (ValidationError otherwise).
        Uniqueness is left to the database's constraint."""
        self.clean_fields()
        super().save(*args, **kwargs)

    def get_absolute_url(self) -> str:
        if self.service.is_default:
            return reverse("releases:detail", args=[self.version])
        return reverse("releases:service_detail", args=[self.service.slug, self.version])

    def clean_fields(self, exclude: Any = None) -> None:
        """The data fields' own validators run first: Django's JSONField check encodes the
        value, which raises (not refuses) on a 5,000-digit integer or 3,000 levels of nesting."""
        exclude = set(exclude or ())
        errors: dict[str, list[ValidationError]] = {}
        for name in DATA_FIELDS:
            if name in exclude:
                continue
            field = self._meta.get_field(name)
            try:
                field.run_validators(getattr(self, name))
            except ValidationError as error:
                errors[name] = error.error_list
                exclude.add(name)
        try:
            super().clean_fields(exclude=exclude)
        except ValidationError as error:
            errors.update(error.message_dict)
        if errors:
            raise ValidationError(errors)

    def get_reassess_url(self) -> str:
        if self.service.is_default:
            return reverse("releases:reassess", args=[self.version])
        return reverse("releases:service_reassess", args=[self.service.slug, self.version])

    def as_summary(self) -> dict[str, Any]:
        """The release summary in the shape the agent's get_release_summary tool returns.

        Missing data stays None so that the agent sees it as missing.
        """
        return {
            "version": self.version,
            "title": self.title or None,
            "changes": self.changes,
            "tests": self.test_results,
            "deployment_metrics": self.deployment_metrics,
        }

    @property
    def latest_report(self) -> RiskReport | None:
        """The newest risk report. Prefetched by `selectors.releases_with_latest_report`;
        without that prefetch this costs one query per release."""
        if hasattr(self, "prefetched_latest_reports"):
            reports: list[RiskReport] = self.prefetched_latest_reports
            return reports[0] if reports else None
        return self.risk_reports.order_by("-filed_at", "-id").first()


class Conversation(models.Model):
    """One agent run for one release: its configuration, life cycle, usage and cost."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    release = models.ForeignKey(
        Release,
        on_delete=models.CASCADE,
        related_name="conversations",
        null=True,
        blank=True,
        help_text="Empty for runs not tied to a stored release (e.g. some eval scenarios).",
    )
    status = models.CharField(
        max_length=16, choices=RunStatus.choices, default=RunStatus.QUEUED, db_index=True
    )
    provider = models.CharField(max_length=32, blank=True)
    model = models.CharField(max_length=128, blank=True)
    system_prompt = models.TextField(blank=True)
    trace_id = models.CharField(
        max_length=32, blank=True, db_index=True, help_text="OpenTelemetry trace id (32 hex)."
    )
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    estimated_cost = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
        help_text="US dollars; empty when the price of the model is unknown.",
    )
    error = models.TextField(blank=True)
    triggered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="triggered_conversations",
    )
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="Last sign of life from the worker running it."
    )
    cancel_requested_at = models.DateTimeField(
        null=True, blank=True, help_text="Set by Cancel; the worker stops the run when it sees it."
    )
    task_id = models.CharField(
        max_length=64, blank=True, help_text="The background task that runs it."
    )
    outcome = models.CharField(
        max_length=16,
        choices=AssessmentOutcome.choices,
        blank=True,
        help_text="What the run stored: a filed report, one kept for review, or none. "
        "Empty while it runs (and for runs before outcomes were recorded).",
    )
    outcome_detail = models.TextField(
        blank=True, help_text="Why, in a sentence: what the model did, or why nothing is stored."
    )
    # The SHA-256 of the run's API token: the token itself is never stored. Empty once the
    # run is over, so the token stops working with it.
    api_token_hash = models.CharField(max_length=64, blank=True, editable=False, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        permissions = [("run_assessment", "Can run a risk assessment of a release")]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=RunStatus.values), name="conversation_status_valid"
            ),
            models.UniqueConstraint(
                fields=["release"],
                condition=Q(status__in=RunStatus.active()),
                name="one_active_conversation_per_release",
                violation_error_message="This release already has a queued or running run.",
            ),
            models.CheckConstraint(
                condition=Q(finished_at__isnull=True)
                | Q(started_at__isnull=True)
                | Q(finished_at__gte=models.F("started_at")),
                name="conversation_finishes_after_start",
            ),
        ]
        indexes = [
            models.Index(fields=["release", "-created_at"], name="conversation_release_recent"),
            models.Index(fields=["status", "heartbeat_at"], name="conversation_status_heartbeat"),
            # The home page's recent runs and its counts of the last seven days.
            models.Index(fields=["-created_at"], name="conversation_recent"),
        ]

    def __str__(self) -> str:
        release = self.release.version if self.release_id and self.release else "no release"
        return f"Run {str(self.id)[:8]} · {release} · {self.status}"

    @property
    def is_active(self) -> bool:
        return self.status in RunStatus.active()

    @property
    def headline(self) -> str:
        """What the run ended with, in words: "Filed", "Stored for review: ...", "No report:
        ..."; "" while it runs or for runs from before outcomes were recorded."""
        if not self.outcome:
            return ""
        if self.outcome == AssessmentOutcome.NO_REPORT:
            return f"No report: {self.outcome_detail}" if self.outcome_detail else "No report"
        label = str(AssessmentOutcome(self.outcome).label)
        if self.outcome == AssessmentOutcome.POLICY_VERDICT and self.outcome_detail:
            return f"{label} ({self.outcome_detail})"
        return label

    @property
    def total_tokens(self) -> int | None:
        if self.input_tokens is None and self.output_tokens is None:
            return None
        return (self.input_tokens or 0) + (self.output_tokens or 0)

    @property
    def duration(self) -> float | None:
        """Seconds from start to finish, None while not both known."""
        if self.started_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


class Message(models.Model):
    """One message of a conversation, at its position (0, 1, 2, ...)."""

    class Role(models.TextChoices):
        SYSTEM = "system", "System"
        USER = "user", "User"
        ASSISTANT = "assistant", "Assistant"
        TOOL = "tool", "Tool"

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="messages"
    )
    position = models.PositiveIntegerField()
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True)
    tool_calls = models.JSONField(
        default=list,
        blank=True,
        help_text='Tool calls requested by the assistant: [{"id", "name", "arguments"}].',
    )
    tool_call_id = models.CharField(
        max_length=128, blank=True, help_text="For a tool message: the call it answers."
    )
    created_at = models.DateTimeField(default=timezone.now)
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["conversation", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "position"], name="message_unique_position"
            ),
            models.CheckConstraint(
                condition=Q(role__in=["system", "user", "assistant", "tool"]),
                name="message_role_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.position} {self.role}"


class AgentEvent(models.Model):
    """One event of a run (text delta, tool call, retry, ...), numbered 1, 2, 3 ... per run."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveIntegerField(help_text="Sequence number within the run, from 1.")
    kind = models.CharField(max_length=64, db_index=True)
    payload = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["conversation", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "seq"], name="event_unique_seq"),
            models.CheckConstraint(condition=Q(seq__gte=1), name="event_seq_positive"),
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.kind}"


class RiskPolicy(models.Model):
    """One version of the risk policy: the thresholds the filed reports are checked against.

    Rows are never edited: a change in the admin saves a new version, so that every report
    keeps pointing at the thresholds it was judged under. The newest version is in force.
    """

    version = models.PositiveIntegerField(unique=True)
    thresholds = models.JSONField(
        help_text="The policy's settings (risk/policy.py, PolicySettings)."
    )
    note = models.CharField(max_length=300, blank=True, help_text="Why this version exists.")
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )

    class Meta:
        ordering = ["-version"]
        verbose_name_plural = "risk policies"

    def __str__(self) -> str:
        return f"Risk policy v{self.version}"


class RiskReport(models.Model):
    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="risk_reports")
    conversation = models.ForeignKey(
        Conversation,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="risk_reports",
        help_text="The run that filed it; empty for reports filed by hand or seeded.",
    )
    severity = models.CharField(max_length=8, choices=Severity.choices)
    findings = models.JSONField(default=list, blank=True, validators=[validate_findings])
    # Issue 30 (evidence): the policy's evidence the model's findings left out, which the
    # findings end with so that a filed report never says less than the policy; the pages mark
    # them "from the policy". The model's own words are the findings before them.
    policy_findings = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_findings],
        help_text="Findings the policy added: its evidence the model's findings left out.",
    )
    summary = models.TextField(blank=True)
    filed_at = models.DateTimeField(default=timezone.now)
    # What the risk policy made of the same release data when the report was filed. Empty
    # for reports filed before the policy existed (or seeded by hand without one).
    policy = models.ForeignKey(
        RiskPolicy,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="risk_reports",
        help_text="The policy version the report was judged under.",
    )
    policy_severity = models.CharField(
        max_length=8,
        choices=Severity.choices,
        blank=True,
        help_text="The severity the policy's rules give the release data.",
    )
    signals = models.JSONField(
        default=list,
        blank=True,
        help_text="The policy's signals: name, level, critical, figure, threshold, detail.",
    )
    grounding = models.JSONField(
        default=list,
        blank=True,
        help_text="Per finding: its evidence in the data, and what could not be found there.",
    )
    needs_review = models.BooleanField(
        default=False,
        db_index=True,
        help_text="The model and the policy disagree, or the report is not grounded: "
        "a person decides.",
    )
    review_reasons = models.JSONField(
        default=list, blank=True, help_text="Why the report needs a person."
    )
    notes = models.JSONField(
        default=list,
        blank=True,
        help_text='Remarks that need no decision, e.g. "the model saw more risk than the policy".',
    )
    origin = models.CharField(
        max_length=16,
        choices=ReportOrigin.choices,
        default=ReportOrigin.MODEL,
        help_text="The model's filing, its refused filing kept for review, or the policy's "
        "verdict when the model filed nothing.",
    )
    # Issue 29 (client): a CI job that waits for this report's decision
    # (`verdict --wait-for-decision`) says so; the review page shows it.
    pipeline_waiting_since = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Since when a pipeline waits for a person's decision on this report.",
    )

    class Meta:
        ordering = ["-filed_at", "-id"]
        get_latest_by = ["filed_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(severity__in=Severity.values), name="riskreport_severity_valid"
            ),
            models.CheckConstraint(
                condition=Q(policy_severity__in=[*Severity.values, ""]),
                name="riskreport_policy_severity_valid",
            ),
        ]
        indexes = [
            # The latest report of each release: WHERE release_id = ? ORDER BY filed_at DESC.
            models.Index(fields=["release", "-filed_at", "-id"], name="riskreport_release_latest"),
            models.Index(fields=["severity", "-filed_at"], name="riskreport_severity_recent"),
        ]

    def __str__(self) -> str:
        return f"{self.release} · {self.severity} · {self.filed_at:%Y-%m-%d %H:%M}"

    @property
    def counts_as(self) -> str | None:
        """The severity that counts (`releases/severity.py`): the annotation
        `severity_shown` when the queryset has it, else from the prefetched decisions, else
        one query for the latest decision."""
        from releases.severity import severity_that_counts

        if hasattr(self, "severity_shown"):
            return self.severity_shown  # type: ignore[no-any-return]
        cached = getattr(self, "_prefetched_objects_cache", {}).get("decisions")
        if cached is not None:
            latest = max(cached, key=lambda d: (d.created_at, d.pk), default=None)
        else:
            latest = self.decisions.order_by("-created_at", "-id").first() if self.pk else None
        return severity_that_counts(
            filed=self.severity,
            policy=self.policy_severity,
            needs_review=self.needs_review,
            decided=latest.severity if latest is not None else None,
        )

    @property
    def model_findings(self) -> list[str]:
        """The findings as the model filed them, without those the policy added."""
        added = set(self.policy_findings or [])
        return [f for f in self.findings or [] if f not in added]

    @property
    def policy_sentences(self) -> list[str]:
        """The policy's own sentences: its signals' readings and the evidence it added."""
        details = [
            str(s.get("detail"))
            for s in self.signals or []
            if isinstance(s, dict) and s.get("detail")
        ]
        return [*details, *(self.policy_findings or [])]

    @property
    def model_own_words(self) -> list[str]:
        """The findings and the summary the model wrote itself, not the policy's sentences:
        the pages mark them "the model's own" beside their grounding (issue 40)."""
        texts = [*self.model_findings, *([self.summary] if self.summary.strip() else [])]
        return own_findings(texts, self.policy_sentences)

    @property
    def agreed_with_policy(self) -> bool:
        """The model filed the policy's severity with the policy's sentences only: the page
        says so once instead of showing the sentences twice (issue 40)."""
        mine = self.model_findings
        return (
            bool(mine)
            and self.severity == self.policy_severity
            and not own_findings(mine, self.policy_sentences)
        )

    def get_counts_as_display(self) -> str:
        counted = self.counts_as
        return Severity(counted).label if counted else ""


class ReviewDecision(models.Model):
    """A person's decision on a risk report: accept its severity, or override it with a reason.

    Decisions are never edited. One decision per report: a second one must name the decision
    it supersedes (`supersedes`), and both stay in the history. The database holds it under
    concurrency (issue 37): one decision per report supersedes none, and each decision is
    superseded at most once, so two people deciding at the same moment store one decision and
    the other is refused. `severity` is the decided one (the report's own for an accept), so
    the lists read one column whatever was decided.
    """

    class Kind(models.TextChoices):
        ACCEPT = "accept", "Accepted"
        OVERRIDE = "override", "Overridden"

    report = models.ForeignKey(RiskReport, on_delete=models.CASCADE, related_name="decisions")
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="review_decisions",
    )
    decision = models.CharField(max_length=8, choices=Kind.choices)
    severity = models.CharField(
        max_length=8, choices=Severity.choices, help_text="The severity the reviewer decided."
    )
    reason = models.TextField(blank=True, help_text="Required for an override.")
    wrong_finding = models.TextField(
        blank=True, help_text="A finding of the report the reviewer labelled wrong, verbatim."
    )
    # Severities at the time of the decision, kept so the history reads on its own even if
    # the report is later edited in the admin.
    model_severity = models.CharField(max_length=8, choices=Severity.choices)
    policy_severity = models.CharField(max_length=8, choices=Severity.choices, blank=True)
    scenario_id = models.CharField(
        max_length=120, blank=True, help_text="The eval scenario this label was exported as."
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    supersedes = models.OneToOneField(
        "self",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="superseded_by",
        help_text="The earlier decision on the same report this one explicitly replaces.",
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        get_latest_by = ["created_at", "id"]
        permissions = [("review_report", "Can accept or override a risk report")]
        constraints = [
            models.UniqueConstraint(
                fields=["report"],
                condition=Q(supersedes__isnull=True),
                name="reviewdecision_one_first_per_report",
                violation_error_message="This report was already decided.",
            ),
            models.CheckConstraint(
                condition=Q(decision__in=["accept", "override"]),
                name="reviewdecision_decision_valid",
            ),
            models.CheckConstraint(
                condition=Q(severity__in=Severity.values), name="reviewdecision_severity_valid"
            ),
            models.CheckConstraint(
                condition=~Q(decision="override") | ~Q(reason=""),
                name="reviewdecision_override_has_reason",
                violation_error_message="An override needs a reason.",
            ),
        ]
        indexes = [
            models.Index(fields=["report", "-created_at", "-id"], name="reviewdecision_latest"),
        ]

    def __str__(self) -> str:
        return f"{self.get_decision_display()} {self.severity} · report {self.report_id}"

    @property
    def is_override(self) -> bool:
        return self.decision == self.Kind.OVERRIDE
