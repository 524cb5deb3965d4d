from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from evals import selectors, services
from evals.models import EvalResult, EvalRun
from releases.admin import ReadOnlyAdminMixin
from releases.admin_display import MISSING, change_link, excerpt, pretty_json, status_pill


def folded_scores(result: EvalResult) -> SafeString:
    """Each dimension's score and the failure reasons on one line; the JSON folded below."""
    trial = result.trial_result()
    if trial is None:
        line = "not scored"
    else:
        parts = [f"{name} {score.value:.2f}" for name, score in sorted(trial.scores.items())]
        if trial.severity_filed:
            parts.append(f"filed {trial.severity_filed}")
        line = " · ".join(parts) or "no scores"
        if trial.failure_reasons:
            line += " — " + excerpt("; ".join(trial.failure_reasons))
    return format_html(
        '<span>{}</span><details><summary style="cursor:pointer;font-size:11px">JSON</summary>'
        "{}</details>",
        line,
        pretty_json(result.scores),
    )


class EvalResultInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = EvalResult
    extra = 0
    show_change_link = True
    # One line per trial: a run holds scenarios x trials of them, and each result's whole JSON
    # made the page tens of thousands of pixels tall. The JSON is one click away, folded.
    fields = [
        "scenario_id",
        "trial",
        "passed",
        "scores_compact",
        "error_excerpt",
        "conversation_link",
    ]
    readonly_fields = fields
    ordering = ["scenario_id", "trial"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[EvalResult]:
        return super().get_queryset(request).select_related("conversation")

    @admin.display(description="scores")
    def scores_compact(self, result: EvalResult) -> SafeString:
        return folded_scores(result)

    @admin.display(description="error")
    def error_excerpt(self, result: EvalResult) -> str:
        return excerpt(result.error)

    @admin.display(description="transcript")
    def conversation_link(self, result: EvalResult) -> SafeString:
        return change_link(result.conversation, "run") if result.conversation_id else MISSING


@admin.register(EvalRun)
class EvalRunAdmin(admin.ModelAdmin):
    # Narrow columns: beside the admin's menu and filters, the list has ~600 px at 1280.
    list_display = [
        "short_name",
        "when",
        "model_label",
        "suite_version",
        "status_badge",
        "pass_rate",
        "verdict",
    ]
    list_display_links = ["short_name"]
    list_filter = ["status", "is_baseline", "suite_version", "provider", "model"]
    search_fields = ["suite_version", "model", "code_revision", "notes"]
    date_hierarchy = "created_at"
    fields = [
        "suite_version",
        "provider",
        "model",
        "code_revision",
        "status_badge",
        "comparison_links",
        "created_at",
        "started_at",
        "finished_at",
        "summary_json",
        "config",
        "error",
        "is_baseline",
        "notes",
    ]
    readonly_fields = [
        "suite_version",
        "provider",
        "model",
        "code_revision",
        "status_badge",
        "created_at",
        "started_at",
        "finished_at",
        "summary_json",
        "config",
        "error",
        # One baseline at a time: changed by the action, which unmarks the previous one.
        "is_baseline",
        "comparison_links",
    ]
    inlines = [EvalResultInline]
    actions = ["mark_as_baseline"]

    def has_add_permission(self, request: object) -> bool:
        return False  # runs are created by `manage.py run_evals`

    @admin.display(description="run", ordering="pk")
    def short_name(self, run: EvalRun) -> str:
        return f"#{run.pk}"

    @admin.display(description="when", ordering="created_at")
    def when(self, run: EvalRun) -> str:
        return timezone.localtime(run.created_at).strftime("%b %-d, %H:%M UTC")

    @admin.display(description="verdict", ordering="is_baseline")
    def verdict(self, run: EvalRun) -> str:
        """Against the baseline, as on the site's evals page; the baseline says so."""
        if run.is_baseline:
            return "baseline"
        verdict = selectors.verdict_of(run)
        return verdict.upper() if verdict else "—"

    @admin.display(description="model", ordering="model")
    def model_label(self, run: EvalRun) -> SafeString:
        return format_html("{}<br><small>{}</small>", run.model or "—", run.provider or "")

    @admin.display(description="status", ordering="status")
    def status_badge(self, run: EvalRun) -> SafeString:
        return status_pill(run.status)

    @admin.display(description="pass rate")
    def pass_rate(self, run: EvalRun) -> str:
        rate = (run.summary or {}).get("pass_rate")
        return "—" if not isinstance(rate, int | float) else f"{rate:.0%}"

    @admin.display(description="summary metrics")
    def summary_json(self, run: EvalRun) -> SafeString:
        headline = {k: v for k, v in run.headline.items() if k != "run_summary"}
        return pretty_json(headline or None)

    @admin.display(description="compare")
    def comparison_links(self, run: EvalRun) -> SafeString:
        if run.pk is None or run.pass_rate is None:
            return MISSING
        admin_url = reverse("admin:evals_evalrun_compare", args=[run.pk])
        page_url = reverse("evals:compare", args=[run.pk]) + "?against=baseline"
        run_url = reverse("evals:run", args=[run.pk])
        return format_html(
            '<a href="{}">Compare to baseline</a> · <a href="{}">on the site</a> · '
            '<a href="{}">run page</a>',
            admin_url,
            page_url,
            run_url,
        )

    def has_mark_baseline_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("evals.mark_baseline")

    @admin.action(description="Mark as baseline", permissions=["mark_baseline"])
    def mark_as_baseline(self, request: HttpRequest, queryset: QuerySet[EvalRun]) -> None:
        runs = list(queryset[:2])
        if len(runs) != 1:
            self.message_user(request, "Choose exactly one run as the baseline.", messages.ERROR)
            return
        try:
            services.mark_baseline(runs[0])
        except ValueError as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return
        self.message_user(request, f"Run #{runs[0].pk} is now the baseline.", messages.SUCCESS)

    def get_urls(self) -> list[URLPattern]:
        compare = path(
            "<int:pk>/compare/",
            self.admin_site.admin_view(self.compare_view),
            name="evals_evalrun_compare",
        )
        return [compare, *super().get_urls()]

    def compare_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        """The run against the baseline (or `?against=<id>`), in the admin."""
        run = self.get_object(request, str(pk))
        if run is None or not self.has_view_permission(request, run):
            raise Http404("No such eval run.")
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "run": run,
            "title": f"Eval run #{run.pk} compared",
        }
        try:
            context["view"] = selectors.compare_view(pk, request.GET.get("against"))
        except selectors.NothingToCompare as exc:
            context["problem"] = str(exc)
        return TemplateResponse(request, "admin/evals/evalrun/compare.html", context)


@admin.register(EvalResult)
class EvalResultAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["__str__", "run_link", "scenario_id", "trial", "passed", "conversation_link"]
    list_filter = ["passed", "scenario_id", "run"]
    search_fields = ["scenario_id", "error"]
    list_select_related = ["run", "conversation"]
    fields = [
        "run_link",
        "scenario_id",
        "trial",
        "passed",
        "scores_json",
        "error",
        "conversation_link",
    ]
    readonly_fields = fields

    @admin.display(description="run", ordering="run")
    def run_link(self, result: EvalResult) -> SafeString:
        return change_link(result.run)

    @admin.display(description="transcript")
    def conversation_link(self, result: EvalResult) -> SafeString:
        return change_link(result.conversation, "run") if result.conversation_id else MISSING

    @admin.display(description="scores")
    def scores_json(self, result: EvalResult) -> SafeString:
        return pretty_json(result.scores)
