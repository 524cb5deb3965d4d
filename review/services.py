"""A reviewer's writes: a decision on a filed report, and its export as an eval scenario."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction

from releases import signals
from releases.models import (
    ReviewDecision,
    RiskReport,
    Severity,
)
from review.scenario import Label, scenario, scenario_data, scenario_id, to_toml

# ---- review: a person's decision on a report, and its label as an eval scenario ---------------

REASON_MAX_LENGTH = 2000


class ReviewError(ValueError):
    """A decision that cannot be recorded; the message says why, for the reviewer."""


def decide_report(
    report: RiskReport,
    reviewer: AbstractBaseUser | None,
    *,
    decision: str,
    severity: str = "",
    reason: str = "",
    wrong_finding: str = "",
) -> ReviewDecision:
    """Record a person's decision: accept the model's or the policy's severity (one click
    either way), or override both with a third severity and a reason. An override to the
    policy's severity is accepting it, and needs no reason.

    The report itself is never changed: the model's and the policy's verdicts stay as filed,
    and the newest decision is the one the lists show."""
    reason = reason.strip()
    if len(reason) > REASON_MAX_LENGTH:
        raise ReviewError(f"The reason is longer than {REASON_MAX_LENGTH} characters.")
    if wrong_finding and wrong_finding not in (report.findings or []):
        raise ReviewError("The finding labelled wrong is not one of the report's findings.")
    offered = [s for s in (report.severity, report.policy_severity) if s]
    if decision == ReviewDecision.Kind.OVERRIDE and severity in offered:
        if severity == report.severity:
            raise ReviewError(
                f"The model already says {severity}: accept it, or choose another severity."
            )
        decision = ReviewDecision.Kind.ACCEPT  # siding with the policy is accepting its verdict
    if decision == ReviewDecision.Kind.ACCEPT:
        severity = severity or report.severity
        if severity not in offered:
            raise ReviewError(
                f"Accept the model's {report.severity} or the policy's "
                f"{report.policy_severity or 'verdict'}; {severity or 'another severity'} is an "
                "override, with a reason."
            )
    elif decision == ReviewDecision.Kind.OVERRIDE:
        if severity not in Severity.values:
            raise ReviewError("Choose the severity the release should have.")
        if not reason:
            raise ReviewError("Say why: an override needs a reason.")
    else:
        raise ReviewError("Accept the report or override it.")
    # The decision and the release's stored verdict (written by its post_save), together.
    with transaction.atomic():
        recorded = ReviewDecision.objects.create(
            report=report,
            reviewer=reviewer if reviewer is not None and reviewer.is_authenticated else None,
            decision=decision,
            severity=severity,
            reason=reason,
            wrong_finding=wrong_finding,
            model_severity=report.severity,
            policy_severity=report.policy_severity,
        )
    signals.send_on_commit(signals.verdict_decided, ReviewDecision, decision=recorded)
    return recorded


def review_label(decision: ReviewDecision) -> Label:
    report = decision.report
    release = report.release
    return Label(
        decision_id=decision.pk,
        version=release.version,
        title=release.title,
        changes=release.changes,
        test_results=release.test_results,
        deployment_metrics=release.deployment_metrics,
        decided_severity=decision.severity,
        model_severity=decision.model_severity,
        policy_severity=decision.policy_severity,
        overridden=decision.is_override,
        reason=decision.reason,
        wrong_finding=decision.wrong_finding,
        reviewer=decision.reviewer.get_username() if decision.reviewer else "",
    )


def scenario_toml(decision: ReviewDecision) -> str:
    """The decision as a scenario file, validated by the eval suite's loader first."""
    label = review_label(decision)
    scenario(label)  # raises ScenarioRejected: never write a file run_evals would refuse
    return to_toml(scenario_data(label))


def review_scenarios_dir() -> Path:
    return Path(settings.DETECTIVE_REVIEW_SCENARIOS_DIR)


def export_scenario(decision: ReviewDecision, directory: Path | None = None) -> Path:
    """Write the decision as an eval scenario into the review scenarios directory (settings
    DETECTIVE_REVIEW_SCENARIOS_DIR), where `run_evals` picks it up. Exporting again rewrites
    the same file."""
    if decision.severity == decision.model_severity and not decision.wrong_finding:
        raise ReviewError(
            "Only a decision against the model's severity (an override, or accepting the "
            "policy's) or a finding labelled wrong teaches the suite something."
        )
    target = Path(directory or review_scenarios_dir())
    target.mkdir(parents=True, exist_ok=True)
    name = scenario_id(review_label(decision))
    path = target / f"{name}.toml"
    text = scenario_toml(decision)
    # Written whole, then renamed: a loader never reads half a file.
    partial_path = path.with_suffix(".toml.part")
    partial_path.write_text(text, encoding="utf-8")
    partial_path.replace(path)
    if decision.scenario_id != name:
        decision.scenario_id = name
        decision.save(update_fields=["scenario_id"])
    return path
