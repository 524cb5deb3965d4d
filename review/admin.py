"""The reviewers' decisions in the admin: their history (read-only) and the action that exports
them as eval scenarios. The model is releases' (its table and admin address stay there)."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from releases.admin_display import ReadOnlyAdminMixin, change_link, excerpt, severity_pill
from releases.models import ReviewDecision
from review import services
from review.scenario import ScenarioRejected


@admin.register(ReviewDecision)
class ReviewDecisionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The history of decisions; never edited (a new decision supersedes an old one)."""

    # Few, narrow columns: beside the admin's menu and filters the list has ~600 px at 1280.
    list_display = ["created_at", "release_link", "decided", "reason_excerpt", "reviewer"]
    list_filter = ["decision", "severity", "created_at"]
    search_fields = ["report__release__version", "reason", "wrong_finding", "reviewer__username"]
    list_select_related = ["report__release", "reviewer"]
    date_hierarchy = "created_at"
    actions = ["export_scenarios"]
    fields = [
        "report",
        "reviewer",
        "decision",
        "severity",
        "model_severity",
        "policy_severity",
        "reason",
        "wrong_finding",
        "scenario_id",
        "created_at",
    ]

    @admin.display(description="release", ordering="report__release__version")
    def release_link(self, decision: ReviewDecision) -> SafeString:
        return change_link(decision.report.release)

    @admin.display(description="decided", ordering="severity")
    def decided(self, decision: ReviewDecision) -> SafeString:
        verb = "overridden" if decision.is_override else "accepted"
        return format_html(
            "{} {}<br><small>model {}, policy {}</small>",
            verb,
            severity_pill(decision.severity),
            decision.model_severity,
            decision.policy_severity or "—",
        )

    @admin.display(description="reason")
    def reason_excerpt(self, decision: ReviewDecision) -> str:
        text = excerpt(decision.reason, words=12) or "—"
        return f"{text} (exported: {decision.scenario_id})" if decision.scenario_id else text

    def has_review_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("releases.review_report")

    @admin.action(
        description="Export the selected labels as eval scenarios", permissions=["review"]
    )
    def export_scenarios(self, request: HttpRequest, queryset: QuerySet[ReviewDecision]) -> None:
        written: list[str] = []
        skipped: list[str] = []
        for decision in queryset.select_related("report__release", "reviewer"):
            try:
                written.append(services.export_scenario(decision).name)
            except (services.ReviewError, ScenarioRejected) as exc:
                skipped.append(f"{decision}: {exc}")
        if written:
            self.message_user(
                request,
                f"Exported {len(written)} scenario(s) to {services.review_scenarios_dir()}: "
                f"{', '.join(written)}. run_evals picks them up (tag from-review).",
                messages.SUCCESS,
            )
        for line in skipped:
            self.message_user(request, f"Not exported: {line}", messages.WARNING)
