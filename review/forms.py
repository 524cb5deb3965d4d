"""Forms that parse what a person submits; the services decide whether it makes sense."""

from __future__ import annotations

from typing import Any

from django import forms

from releases.models import ReviewDecision, RiskReport, Severity
from review.services import REASON_MAX_LENGTH


class ReviewForm(forms.Form):
    decision = forms.ChoiceField(choices=ReviewDecision.Kind.choices, required=False)
    # "Accept the policy's High" / "Accept the model's Medium": the button names the severity.
    accept = forms.ChoiceField(choices=Severity.choices, required=False)
    severity = forms.ChoiceField(choices=[("", "—"), *Severity.choices], required=False)
    reason = forms.CharField(max_length=REASON_MAX_LENGTH, required=False)
    # The index of the finding labelled wrong, among the report's findings.
    wrong_finding = forms.TypedChoiceField(coerce=int, required=False, empty_value=None)
    # The decision this one replaces, named on purpose (a second decision without it is refused).
    supersedes = forms.IntegerField(required=False, min_value=1, max_value=2**63 - 1)

    def __init__(self, report: RiskReport, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.report = report
        findings = report.findings or []
        self.fields["wrong_finding"].choices = [("", "—")] + [
            (str(index), finding) for index, finding in enumerate(findings)
        ]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("accept"):
            data["decision"], data["severity"] = ReviewDecision.Kind.ACCEPT, data["accept"]
        elif not data.get("decision"):
            raise forms.ValidationError("Accept a verdict or override it.")
        return data

    def wrong_finding_text(self) -> str:
        index = self.cleaned_data.get("wrong_finding")
        return "" if index is None else (self.report.findings or [])[index]
