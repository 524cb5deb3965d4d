"""The release managers' form: a release and its summary as fields (no raw JSON), and uploads
of JUnit XML reports and a metrics file. It only reads what was typed; the services validate and
store it, as for every other way in."""

from __future__ import annotations

from typing import Any

from django import forms

from releases.models import Release, Service
from releases.validation import VERSION_FORMAT, VERSION_PATTERN
from sources.models import MetricWindow
from sources.services import HandSummary, ReleaseFields


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("widget", MultipleFileInput(attrs={"accept": ".xml,application/xml"}))
        super().__init__(*args, **kwargs)

    def clean(self, data: Any, initial: Any = None) -> list[Any]:
        if not data:
            return []
        files = data if isinstance(data, list | tuple) else [data]
        return [super(MultipleFileField, self).clean(item, initial) for item in files]


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


class ReleaseForm(forms.Form):
    service = forms.ModelChoiceField(
        Service.objects.filter(hidden=False), required=False, empty_label="Default service"
    )
    version = forms.RegexField(
        regex=rf"\A{VERSION_PATTERN}\Z", help_text=f"e.g. v2.1.0: {VERSION_FORMAT}."
    )
    title = forms.CharField(max_length=200, required=False)
    environment = forms.CharField(max_length=64, required=False)
    deployed_at = forms.DateTimeField(
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        help_text="UTC.",
    )
    git_from_ref = forms.CharField(label="Git from", max_length=255, required=False)
    git_to_ref = forms.CharField(label="Git to", max_length=255, required=False)
    head_sha = forms.CharField(label="Head SHA", max_length=64, required=False)
    pipeline_url = forms.URLField(
        label="Pipeline run", max_length=500, required=False, assume_scheme="https"
    )

    changes = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 5}),
        required=False,
        help_text="One change per line. Empty: missing.",
    )
    passed = forms.IntegerField(min_value=0, required=False)
    failed = forms.IntegerField(min_value=0, required=False)
    skipped = forms.IntegerField(min_value=0, required=False)
    failing_tests = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}), required=False, help_text="One per line."
    )
    error_rate = forms.FloatField(
        label="Error rate (%)", min_value=0, max_value=100, required=False
    )
    response_time_p95 = forms.FloatField(label="p95 latency (ms)", min_value=0, required=False)

    junit = MultipleFileField(
        label="JUnit XML reports",
        required=False,
        help_text="pytest, Maven Surefire, Jest (jest-junit) ... Their results replace the "
        "test figures above.",
    )
    metrics_file = forms.FileField(
        label="Metrics file",
        required=False,
        help_text="OpenMetrics or Prometheus text; replaces the figures above.",
    )
    metrics_window = forms.ChoiceField(
        choices=MetricWindow.choices, initial=MetricWindow.RELEASE, label="It measures"
    )

    @classmethod
    def for_release(cls, release: Release) -> ReleaseForm:
        tests = release.test_results or {}
        metrics = release.deployment_metrics or {}
        rate = metrics.get("error_rate")
        initial = {
            "service": release.service if not release.service.is_default else None,
            "version": release.version,
            "title": release.title,
            "environment": release.environment,
            "deployed_at": release.deployed_at,
            "git_from_ref": release.git_from_ref,
            "git_to_ref": release.git_to_ref,
            "head_sha": release.head_sha,
            "pipeline_url": release.pipeline_url,
            "changes": "\n".join(release.changes or []),
            "passed": tests.get("passed"),
            "failed": tests.get("failed"),
            "skipped": tests.get("skipped"),
            "failing_tests": "\n".join(tests.get("failing_tests") or []),
            "error_rate": round(rate * 100, 6) if isinstance(rate, int | float) else None,
            "response_time_p95": metrics.get("response_time_p95"),
        }
        return cls(initial=initial)

    def release_fields(self) -> ReleaseFields:
        data = self.cleaned_data
        service = data["service"]
        return ReleaseFields(
            version=data["version"],
            service=service.slug if service else None,
            title=data["title"],
            environment=data["environment"],
            git_from_ref=data["git_from_ref"],
            git_to_ref=data["git_to_ref"],
            head_sha=data["head_sha"],
            pipeline_url=data["pipeline_url"],
            deployed_at=data["deployed_at"],
        )

    def summary(self, release: Release | None) -> HandSummary:
        """What was typed, in the summary's shape. A part whose fields are all empty is left
        as it is; figures an upload will give are left to the upload."""
        data = self.cleaned_data
        changes = _lines(data["changes"]) or None
        counts = {name: data[name] for name in ("passed", "failed", "skipped")}
        failing = _lines(data["failing_tests"])
        tests = None
        if not data["junit"] and (any(v is not None for v in counts.values()) or failing):
            tests = {name: value for name, value in counts.items() if value is not None}
            if failing:
                tests["failing_tests"] = failing
            earlier = (release.test_results or {}) if release else {}
            # Counts the form does not show (flaky, from JUnit) stay as they were.
            tests = {**{k: v for k, v in earlier.items() if k.startswith("flaky")}, **tests}
        metrics = None
        rate, p95 = data["error_rate"], data["response_time_p95"]
        if not data["metrics_file"] and (rate is not None or p95 is not None):
            earlier = (release.deployment_metrics or {}) if release else {}
            metrics = {
                **earlier,
                "error_rate": rate / 100 if rate is not None else None,
                "response_time_p95": p95,
            }
        return HandSummary(changes=changes, test_results=tests, deployment_metrics=metrics)
