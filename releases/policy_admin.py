"""The risk policy in the admin: one form field per threshold, and every save a new version.

A policy row is never changed in place: reports point at the version they were judged under,
so editing v3 saves v4 (with who and why) and leaves v3 as it was.
"""

from __future__ import annotations

import json
from typing import Any, get_args

from django import forms
from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from releases import services, verdicts
from releases.models import RiskPolicy
from risk.policy import Level, PolicySettings, threshold_order_problems

LEVELS = [(level, level) for level in get_args(Level)]


def policy_changes(before: dict[str, Any], after: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The settings that differ between two versions: (name, before, after), as JSON text."""
    return [
        (name, json.dumps(before.get(name)), json.dumps(after.get(name)))
        for name in sorted(set(before) | set(after))
        if before.get(name) != after.get(name)
    ]


# Settings stored as fractions (0.05) that the site shows as percentages (5 %): edited as such.
PERCENT_SETTINGS = ("error_rate_", "p95_rise_", "skipped_share_", "metric_confidence")


class PercentField(forms.FloatField):
    """A fraction edited as a percentage: 0.05 shows as 5, and 5 is stored as 0.05."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(f"{value * 100:.6g}")
        return value

    def __init__(self, *, max_percent: float | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_percent = max_percent

    def to_python(self, value: Any) -> float | None:
        number = super().to_python(value)
        if number is not None and self.max_percent is not None and number > self.max_percent:
            raise forms.ValidationError(f"At most {self.max_percent:g} %.")
        return None if number is None else number / 100


class AreasField(forms.CharField):
    """The critical areas as lines of "area: word, word", not a JSON blob."""

    widget = forms.Textarea(attrs={"rows": 6, "cols": 60})

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, dict):
            return "\n".join(f"{area}: {', '.join(words)}" for area, words in value.items())
        return value

    def to_python(self, value: Any) -> dict[str, list[str]]:
        areas: dict[str, list[str]] = {}
        for number, line in enumerate(str(value or "").splitlines(), start=1):
            if not line.strip():
                continue
            area, colon, words = line.partition(":")
            listed = [word.strip() for word in words.split(",") if word.strip()]
            if not colon or not area.strip() or not listed:
                raise forms.ValidationError(
                    f'Line {number} ("{line.strip()}") is not "area: word, word".'
                )
            areas[area.strip()] = listed
        return areas


class LinesField(forms.CharField):
    """A list of texts (patterns) as one a line."""

    widget = forms.Textarea(attrs={"rows": 4, "cols": 80})

    def prepare_value(self, value: Any) -> Any:
        return "\n".join(value) if isinstance(value, list) else value

    def to_python(self, value: Any) -> list[str]:
        return [line.strip() for line in str(value or "").splitlines() if line.strip()]


class JsonSettingField(forms.CharField):
    """A nested setting (the metric judge's per-metric settings) as JSON; PolicySettings
    checks its shape when the form is cleaned."""

    widget = forms.Textarea(attrs={"rows": 8, "cols": 80})

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, dict):
            plain = {
                key: inner.model_dump(mode="json") if hasattr(inner, "model_dump") else inner
                for key, inner in value.items()
            }
            return json.dumps(plain, indent=2)
        return value

    def to_python(self, value: Any) -> Any:
        try:
            return json.loads(str(value or "{}"))
        except json.JSONDecodeError as error:
            raise forms.ValidationError(f"Not JSON: {error}") from None


def _field_for(name: str, info: Any) -> forms.Field:
    annotation = info.annotation
    optional = type(None) in get_args(annotation)
    base = next((a for a in get_args(annotation) if a is not type(None)), annotation)
    help_text = name.replace("_", " ")
    if optional:
        help_text += " (empty: not judged)"
    if base is bool:
        return forms.BooleanField(required=False, help_text=help_text)
    if name.endswith("_level"):
        return forms.ChoiceField(choices=LEVELS, help_text=help_text)
    if base is int:
        return forms.IntegerField(required=not optional, min_value=1, help_text=help_text)
    if base is float and name.startswith(PERCENT_SETTINGS):
        share = not name.startswith("p95_rise_")  # a share of all, unlike a rise
        return PercentField(
            required=not optional,
            min_value=0,
            max_percent=100 if share else None,
            help_text=help_text + ", in % (5 is 5 %)",
        )
    if base is float:
        unit = ", in ms" if "_ms_" in name or name.endswith("_ms_rise") else ""
        return forms.FloatField(required=not optional, min_value=0, help_text=help_text + unit)
    if name == "schema_change_patterns":
        return LinesField(
            required=False,
            help_text="one regular expression a line, found in change titles and commit "
            "messages (case-insensitive): a database upgrade or schema change",
        )
    if name == "public_api_paths":
        return LinesField(
            required=False,
            help_text="one glob a line: a public route or API file; one moved away is a "
            "breaking change",
        )
    if name in ("metric_settings", "route_metric_settings"):
        return JsonSettingField(
            help_text='per metric: {"label", "unit", "percent", "bad_direction": "increase" or '
            '"decrease", "effect": "median" or "mean", "allowed_ratio", "min_absolute_change", '
            '"critical"}'
        )
    if name == "metric_names":
        return JsonSettingField(
            required=False,
            help_text='per service slug ("*": any other): {"error_rate_gauges", "p95_gauges", '
            '"latency_histograms": [{"name", "factor"}], "request_counters": [{"name", '
            '"status_label", "error_pattern"}], "prometheus": {"error_rate", '
            '"response_time_p95", "response_time_p95_factor", "rate_interval", "step"}} '
            "(docs/using/metrics.md)",
        )
    if name in ("critical_paths", "change_area_paths"):
        return AreasField(
            help_text="one area a line, then the globs of its code's paths (a commit is in "
            'the area by its code files): "payments: payments/*, */billing/*"'
        )
    return AreasField(
        help_text="one area a line, then the words that find it in test names and changes: "
        '"payments: payment, refund, checkout"'
    )


class _PolicyForm(forms.ModelForm):
    note = forms.CharField(
        max_length=300, required=True, help_text="Why this version: kept with it."
    )

    class Meta:
        model = RiskPolicy
        fields = ["note"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        current = PolicySettings.model_validate(self.instance.thresholds or {})
        for name in PolicySettings.model_fields:
            self.fields[name].initial = getattr(current, name)
        if self.instance.pk:
            self.fields["note"].initial = ""

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        values = {name: cleaned.get(name) for name in PolicySettings.model_fields}
        try:
            self.settings = PolicySettings.model_validate(values)
        except ValueError as error:
            raise forms.ValidationError(str(error)) from error
        if problems := threshold_order_problems(self.settings):
            raise forms.ValidationError(problems)
        return cleaned


# One declared field per setting, so that the admin's form factory knows them all.
RiskPolicyForm = type(
    "RiskPolicyForm",
    (_PolicyForm,),
    {name: _field_for(name, info) for name, info in PolicySettings.model_fields.items()},
)


@admin.register(RiskPolicy)
class RiskPolicyAdmin(admin.ModelAdmin):
    form = RiskPolicyForm
    list_display = ["__str__", "in_force", "note", "created_by", "created_at", "report_count"]
    ordering = ["-version"]
    readonly_fields = ["in_force", "changes_from_previous"]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        shown = ["in_force", "changes_from_previous"] if obj is not None else []
        return [*shown, "note", *PolicySettings.model_fields]

    @admin.display(description="in force", boolean=True)
    def in_force(self, policy: RiskPolicy) -> bool:
        return policy.pk is not None and policy.pk == verdicts.current_policy().pk

    @admin.display(description="what changed from the version before")
    def changes_from_previous(self, policy: RiskPolicy) -> SafeString:
        previous = (
            RiskPolicy.objects.filter(version__lt=policy.version).order_by("-version").first()
        )
        if previous is None:
            return format_html("{}", "The first version: nothing before it.")
        changed = policy_changes(previous.thresholds or {}, policy.thresholds or {})
        if not changed:
            return format_html("{}", f"Same settings as v{previous.version}.")
        items = format_html_join(
            "", "<li><code>{}</code>: {} → {}</li>", ((n, b, a) for n, b, a in changed)
        )
        return format_html("<p>Against v{}:</p><ul>{}</ul>", previous.version, items)

    @admin.display(description="reports judged under it")
    def report_count(self, policy: RiskPolicy) -> int:
        return policy.risk_reports.count()

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: RiskPolicy, form: Any, change: bool) -> None:
        # A new version, never an edit: `obj` is replaced by the saved one for the redirect.
        saved = services.new_policy_version(
            form.settings, note=form.cleaned_data["note"], user=request.user
        )
        obj.pk, obj.version, obj.thresholds = saved.pk, saved.version, saved.thresholds
        obj._state.adding = False

    def response_change(self, request: HttpRequest, obj: RiskPolicy) -> Any:
        self.message_user(request, f"Saved as a new version: {obj}.")
        return super().response_post_save_change(request, obj)

    def log_change(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        return self.log_addition(request, obj, json.dumps([{"added": {}}]))
