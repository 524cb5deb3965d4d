from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet, URLField
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from releases import (
    policy_admin,  # noqa: F401  (registers the risk policy's admin)
)
from releases.admin_display import (
    MISSING,
    PRETTY_JSON_OVERRIDES,
    ReadOnlyAdminMixin,
    change_link,
    changelist_link,
    excerpt,
    pre,
    pretty_json,
    severity_pill,
    status_pill,
)
from releases.models import (
    AgentEvent,
    Conversation,
    Message,
    Release,
    ReviewDecision,
    RiskReport,
    Severity,
)
from releases.selectors import (
    releases_with_latest_report,
    reports_with_severity_shown,
    with_severity_shown,
)
from releases.templatetags.release_format import milliseconds, percent


class LatestSeverityFilter(admin.SimpleListFilter):
    title = "risk (the severity that counts)"
    parameter_name = "latest_severity"
    NOT_ASSESSED = "none"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [*Severity.choices, (self.NOT_ASSESSED, "Not assessed")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Release]) -> QuerySet[Release]:
        value = self.value()
        if value is None:
            return queryset
        if value == self.NOT_ASSESSED:
            return queryset.filter(risk_reports__isnull=True)
        # The severity that counts, as the release list counts it.
        return with_severity_shown(queryset).filter(effective_severity=value)


# ---- inlines ----------------------------------------------------------------------------------


class RiskReportInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = RiskReport
    extra = 0
    show_change_link = True
    fields = ["severity_badge", "filed_at", "summary_excerpt", "conversation_link"]
    readonly_fields = fields
    ordering = ["-filed_at", "-id"]

    @admin.display(description="severity")
    def severity_badge(self, report: RiskReport) -> SafeString:
        return severity_pill(report.severity)

    @admin.display(description="summary")
    def summary_excerpt(self, report: RiskReport) -> str:
        return excerpt(report.summary)

    @admin.display(description="filed by run")
    def conversation_link(self, report: RiskReport) -> SafeString:
        return change_link(report.conversation, "run") if report.conversation_id else MISSING

    def get_queryset(self, request: HttpRequest) -> QuerySet[RiskReport]:
        return super().get_queryset(request).select_related("conversation")


class ConversationInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = Conversation
    fk_name = "release"
    extra = 0
    show_change_link = True
    fields = ["status_badge", "provider", "model", "created_at", "triggered_by"]
    readonly_fields = fields
    ordering = ["-created_at"]
    verbose_name = "run"
    verbose_name_plural = "runs"

    @admin.display(description="status")
    def status_badge(self, conversation: Conversation) -> SafeString:
        return status_pill(conversation.status)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Conversation]:
        return super().get_queryset(request).select_related("triggered_by")


class MessageInline(ReadOnlyAdminMixin, admin.StackedInline):
    model = Message
    extra = 0
    fields = [
        ("position", "role", "created_at"),
        "content_block",
        "tool_calls_json",
        "tool_call_id",
    ]
    readonly_fields = [
        "position",
        "role",
        "created_at",
        "content_block",
        "tool_calls_json",
        "tool_call_id",
    ]
    ordering = ["position"]

    @admin.display(description="content")
    def content_block(self, message: Message) -> SafeString:
        return pre(message.content)

    @admin.display(description="tool calls")
    def tool_calls_json(self, message: Message) -> SafeString | str:
        return pretty_json(message.tool_calls) if message.tool_calls else "—"


class AgentEventInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = AgentEvent
    extra = 0
    fields = ["seq", "kind", "payload_json", "created_at"]
    readonly_fields = fields
    ordering = ["seq"]
    verbose_name = "event"

    @admin.display(description="payload")
    def payload_json(self, event: AgentEvent) -> SafeString:
        return pretty_json(event.payload)


# ---- model admins ------------------------------------------------------------------------------


PROVENANCE = ["environment", ("git_from_ref", "git_to_ref"), "head_sha", "pipeline_url"]


@admin.register(Release)
class ReleaseAdmin(admin.ModelAdmin):
    list_display = [
        "version",
        "service",
        "title",
        "latest_risk",
        "tests",
        "error_rate",
        "response_time_p95",
        "created_at",
    ]
    list_display_links = ["version", "title"]
    list_filter = [LatestSeverityFilter, "service", "created_at"]
    search_fields = ["version", "title"]
    list_select_related = ["service"]
    date_hierarchy = "created_at"
    formfield_overrides = {**PRETTY_JSON_OVERRIDES, URLField: {"assume_scheme": "https"}}
    fieldsets = [
        (None, {"fields": ["service", "version", "title", "created_at", "updated_at"]}),
        ("Where it came from", {"fields": [*PROVENANCE, "deployed_at"], "classes": ["collapse"]}),
        (
            "Release data",
            {
                "fields": ["changes", "test_results", "deployment_metrics"],
                "description": "Leave a box empty when the data is missing: "
                "the agent treats missing data differently from zero.",
            },
        ),
        ("Assessments", {"fields": ["latest_risk", "all_runs", "all_decisions"]}),
    ]
    readonly_fields = ["updated_at", "latest_risk", "all_runs", "all_decisions"]
    inlines = [RiskReportInline, ConversationInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Release]:
        return with_severity_shown(releases_with_latest_report(super().get_queryset(request)))

    @admin.display(description="risk", ordering="effective_severity")
    def latest_risk(self, release: Release) -> SafeString:
        """The severity that counts, with the model's and the policy's beside it."""
        report = release.latest_report
        if report is None:
            return severity_pill(None)
        counted = getattr(release, "effective_severity", None) or report.severity
        own = format_html(
            ' <span class="help">model {}, policy {}</span>',
            report.severity,
            report.policy_severity or "—",
        )
        return format_html("{}{}", change_link(report, severity_pill(counted)), own)

    @admin.display(description="tests")
    def tests(self, release: Release) -> str | SafeString:
        results = release.test_results
        if results is None:
            return MISSING
        counts = [
            f"{results[key]} {key}" for key in ("passed", "failed", "skipped") if key in results
        ]
        if not counts:
            return "—"
        # Each count in one piece, the list wrapping between them: the list fits 1280 px.
        return format_html_join(
            ", ", '<span style="white-space:nowrap">{}</span>', ((count,) for count in counts)
        )

    @admin.display(description="error rate")
    def error_rate(self, release: Release) -> str | SafeString:
        value = percent((release.deployment_metrics or {}).get("error_rate"), 2)
        return MISSING if value is None else value

    @admin.display(description="p95")
    def response_time_p95(self, release: Release) -> str | SafeString:
        value = milliseconds((release.deployment_metrics or {}).get("response_time_p95"))
        return MISSING if value is None else value

    @admin.display(description="runs")
    def all_runs(self, release: Release) -> SafeString:
        if release.pk is None:
            return MISSING
        return changelist_link(
            Conversation, "all runs of this release", release__id__exact=release.pk
        )

    @admin.display(description="review decisions")
    def all_decisions(self, release: Release) -> SafeString:
        if release.pk is None:
            return MISSING
        return changelist_link(
            ReviewDecision,
            "all review decisions on this release",
            report__release__id__exact=release.pk,
        )


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "short_id",
        "release_link",
        "status_badge",
        "outcome",
        "provider",
        "model",
        "input_tokens",
        "output_tokens",
        "estimated_cost",
        "created_at",
        "duration_seconds",
    ]
    list_filter = ["status", "outcome", "provider", "model", "created_at"]
    search_fields = ["id", "release__version", "trace_id", "model", "error"]
    list_select_related = ["release", "triggered_by"]
    date_hierarchy = "created_at"
    fieldsets = [
        (
            "Run",
            {
                "fields": [
                    "id",
                    "release_link",
                    "status_badge",
                    "triggered_by",
                    "provider",
                    "model",
                    "trace_id",
                    "reports",
                ]
            },
        ),
        (
            "Timing",
            {
                "fields": [
                    "created_at",
                    "started_at",
                    "finished_at",
                    "heartbeat_at",
                    "duration_seconds",
                ]
            },
        ),
        ("Usage", {"fields": ["input_tokens", "output_tokens", "estimated_cost"]}),
        ("Outcome", {"fields": ["outcome", "outcome_detail", "error_block"]}),
        (
            "Configuration",
            {"fields": ["system_prompt_block", "metadata_json"], "classes": ["collapse"]},
        ),
    ]
    readonly_fields = [
        "id",
        "release_link",
        "status_badge",
        "outcome",
        "outcome_detail",
        "triggered_by",
        "provider",
        "model",
        "trace_id",
        "reports",
        "created_at",
        "started_at",
        "finished_at",
        "heartbeat_at",
        "duration_seconds",
        "input_tokens",
        "output_tokens",
        "estimated_cost",
        "error_block",
        "system_prompt_block",
        "metadata_json",
    ]
    inlines = [MessageInline, AgentEventInline]

    @admin.display(description="run", ordering="created_at")
    def short_id(self, conversation: Conversation) -> str:
        return str(conversation.id)[:8]

    @admin.display(description="release", ordering="release__version")
    def release_link(self, conversation: Conversation) -> SafeString:
        return change_link(conversation.release)

    @admin.display(description="status", ordering="status")
    def status_badge(self, conversation: Conversation) -> SafeString:
        return status_pill(conversation.status)

    @admin.display(description="duration")
    def duration_seconds(self, conversation: Conversation) -> str:
        seconds = conversation.duration
        return "—" if seconds is None else f"{seconds:.1f} s"

    @admin.display(description="error")
    def error_block(self, conversation: Conversation) -> SafeString:
        return pre(conversation.error)

    @admin.display(description="system prompt")
    def system_prompt_block(self, conversation: Conversation) -> SafeString:
        return pre(conversation.system_prompt)

    @admin.display(description="metadata")
    def metadata_json(self, conversation: Conversation) -> SafeString:
        return pretty_json(conversation.metadata)

    @admin.display(description="risk reports filed")
    def reports(self, conversation: Conversation) -> SafeString:
        return changelist_link(
            RiskReport, "reports filed by this run", conversation__id__exact=conversation.pk
        )


@admin.register(Message)
class MessageAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "__str__",
        "conversation_link",
        "role",
        "content_excerpt",
        "tool_call_count",
        "created_at",
    ]
    list_filter = ["role", "created_at"]
    search_fields = ["content", "tool_call_id", "conversation__release__version"]
    list_select_related = ["conversation__release"]
    fields = [
        "conversation_link",
        "position",
        "role",
        "created_at",
        "content_block",
        "tool_calls_json",
        "tool_call_id",
        "metadata_json",
    ]
    readonly_fields = fields

    @admin.display(description="run")
    def conversation_link(self, message: Message) -> SafeString:
        return change_link(message.conversation)

    @admin.display(description="content")
    def content_excerpt(self, message: Message) -> str:
        return excerpt(message.content)

    @admin.display(description="content")
    def content_block(self, message: Message) -> SafeString:
        return pre(message.content)

    @admin.display(description="tool calls")
    def tool_call_count(self, message: Message) -> int:
        return len(message.tool_calls or [])

    @admin.display(description="tool calls")
    def tool_calls_json(self, message: Message) -> SafeString:
        return pretty_json(message.tool_calls)

    @admin.display(description="metadata")
    def metadata_json(self, message: Message) -> SafeString:
        return pretty_json(message.metadata)


@admin.register(AgentEvent)
class AgentEventAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["__str__", "conversation_link", "kind", "payload_excerpt", "created_at"]
    list_filter = ["kind", "created_at"]
    search_fields = ["kind", "conversation__release__version"]
    list_select_related = ["conversation__release"]
    fields = ["conversation_link", "seq", "kind", "created_at", "payload_json"]
    readonly_fields = fields

    @admin.display(description="run")
    def conversation_link(self, event: AgentEvent) -> SafeString:
        return change_link(event.conversation)

    @admin.display(description="payload")
    def payload_excerpt(self, event: AgentEvent) -> str:
        return excerpt(str(event.payload), 12)

    @admin.display(description="payload")
    def payload_json(self, event: AgentEvent) -> SafeString:
        return pretty_json(event.payload)


class ReviewDecisionInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = ReviewDecision
    extra = 0
    fields = ["created_at", "reviewer", "decision", "severity", "reason", "wrong_finding"]
    readonly_fields = fields
    show_change_link = True


@admin.register(RiskReport)
class RiskReportAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Read-only: a report is the record of a filing; a person's correction is a decision."""

    inlines = [ReviewDecisionInline]
    list_display = [
        "__str__",
        "release_link",
        "counts_badge",
        "severity_badge",
        "policy_badge",
        "origin",
        "needs_review",
        "finding_count",
        "conversation_link",
        "filed_at",
    ]
    list_filter = ["severity", "needs_review", "policy_severity", "origin", "filed_at"]
    search_fields = ["release__version", "release__title", "summary"]
    list_select_related = ["release", "conversation"]
    date_hierarchy = "filed_at"
    autocomplete_fields = ["release", "conversation"]
    formfield_overrides = PRETTY_JSON_OVERRIDES
    fields = [
        "release",
        "counts_badge",
        "severity",
        "origin",
        "findings",
        "summary",
        "conversation",
        "filed_at",
        "policy",
        "policy_severity",
        "needs_review",
        "review_reasons",
        "notes",
        "signals_table",
        "grounding_table",
    ]
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[RiskReport]:
        return reports_with_severity_shown(super().get_queryset(request))

    @admin.display(description="counts", ordering="severity_shown")
    def counts_badge(self, report: RiskReport) -> SafeString:
        """The severity that counts: a person's decision, else the higher of the model's and
        the policy's while it waits for review, else the filed one."""
        return severity_pill(getattr(report, "severity_shown", None) or report.severity)

    @admin.display(description="policy", ordering="policy_severity")
    def policy_badge(self, report: RiskReport) -> SafeString:
        return severity_pill(report.policy_severity) if report.policy_severity else MISSING

    @admin.display(description="signals")
    def signals_table(self, report: RiskReport) -> SafeString:
        return pretty_json(report.signals)

    @admin.display(description="grounding of the findings")
    def grounding_table(self, report: RiskReport) -> SafeString:
        return pretty_json(report.grounding)

    @admin.display(description="release", ordering="release__version")
    def release_link(self, report: RiskReport) -> SafeString:
        return change_link(report.release)

    @admin.display(description="model", ordering="severity")
    def severity_badge(self, report: RiskReport) -> SafeString:
        return severity_pill(report.severity)

    @admin.display(description="findings")
    def finding_count(self, report: RiskReport) -> int:
        return len(report.findings or [])

    @admin.display(description="filed by run")
    def conversation_link(self, report: RiskReport) -> SafeString:
        return change_link(report.conversation, "run") if report.conversation_id else MISSING
