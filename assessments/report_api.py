"""`POST /api/risk-reports`: a run's agent files its risk report (JSON in and out), checked
against the policy and the data (`assessments.filing.file_checked_report`): 201 with the
policy's view when stored, 422 with every problem when refused, 400 for a body that is not a
report. The callers are the release API's (sources/release_api.py): a run's own token, for
its release alone (another release is refused with 403), or the site's API key; an eval
trial's filing is judged against its scenario (`releases.eval_hooks`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from assessments import filing
from releases import eval_hooks, validation
from releases.models import RiskReport
from risk.filing import FilingDecision
from sources.release_api import api_error, authenticate, named_service

MAX_FINDINGS = 50
MAX_FINDING_CHARS = 1_000
MAX_SUMMARY_CHARS = 4_000
Version = Annotated[
    str,
    StringConstraints(
        strip_whitespace=True,
        max_length=validation.VERSION_MAX_LENGTH,
        pattern=rf"^{validation.VERSION_PATTERN}$",
    ),
]
Finding = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_FINDING_CHARS)
]


class RiskReportIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    release_id: Version
    severity: Literal["high", "medium", "low"]
    findings: list[Finding] = Field(min_length=1, max_length=MAX_FINDINGS)
    summary: str = Field(default="", max_length=MAX_SUMMARY_CHARS)


@login_not_required
@csrf_exempt
@require_POST
def file_risk_report(request: HttpRequest) -> JsonResponse:
    caller = authenticate(request)
    if isinstance(caller, JsonResponse):
        return caller
    try:
        body = validation.parse_json_body(request.body)
    except validation.BodyError as exc:
        return api_error(400, f"Invalid body: {exc}.")
    try:
        report = RiskReportIn.model_validate(body)
    except ValidationError as exc:
        problems = [_problem(error) for error in exc.errors(include_url=False)]
        return api_error(
            400, "Invalid risk report: " + "; ".join(problems) + ".", problems=problems
        )
    trials = eval_hooks.trial_api(caller.run)
    if trials is not None and caller.run is not None:
        fields = report.model_dump()
        fields["summary"] = report.summary.strip()
        return trials.file_report(caller.run, **fields)
    service = named_service(request)
    if not caller.may_touch(report.release_id) or not caller.may_touch_service(service):
        version = caller.run.release.version  # type: ignore[union-attr]
        return api_error(
            403,
            f"This token may file a report for release {version} only, not {report.release_id}.",
        )
    release = caller.release(report.release_id, service)
    if release is None:
        of = f" of the service {service!r}" if service else ""
        return api_error(404, f"No release {report.release_id!r}{of}.")
    checked = filing.file_checked_report(
        release=release,
        severity=report.severity,
        findings=report.findings,
        summary=report.summary.strip(),
        conversation=caller.run,
    )
    return filing_response(checked.decision, checked.report)


def filing_response(decision: FilingDecision, report: RiskReport | None) -> JsonResponse:
    """422 with every problem when a filing is refused; 201 with the policy's view when not."""
    if report is None:
        return api_error(422, decision.refusal_message(), problems=decision.problems)
    return JsonResponse(
        {
            "report_id": report.pk,
            "release_id": report.release.version,
            "severity": report.severity,
            "findings": report.findings,
            # The policy's evidence the model's findings left out, which the findings end with.
            "policy_findings": report.policy_findings,
            "summary": report.summary,
            "filed_at": report.filed_at.isoformat(),
            **decision_fields(decision),
        },
        status=201,
    )


def decision_fields(decision: FilingDecision) -> dict[str, Any]:
    return {
        "policy_severity": decision.policy_severity,
        "needs_review": decision.needs_review,
        "review_reasons": decision.review_reasons,
        "notes": decision.notes,
    }


def _problem(error: Any) -> str:
    where = ".".join(str(part) for part in error["loc"]) or "body"
    message = str(error["msg"])
    if error["type"] == "model_type":
        return "the body must be a JSON object"
    if error["type"] == "missing":
        return f"{where} is required"
    if error["type"] == "extra_forbidden":
        return f"{where} is not a field of a risk report"
    if error["type"] == "string_pattern_mismatch":
        return f"{where} is not a release version ({validation.VERSION_FORMAT})"
    return f"{where}: {message}"
