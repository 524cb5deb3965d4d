"""What an assessment's root span says of it: the release as its input, the verdict the run
stored (and its state) as its output, and whether that is an error (OpenInference's
`input.value` / `output.value`, see `agent/telemetry/trace_context.py`)."""

from __future__ import annotations

from typing import Any

from agent.telemetry import capture_content_default
from releases.models import Conversation, RiskReport, RunStatus


def release_input(run: Conversation) -> dict[str, Any]:
    """The root span's input: the release as the agent's tools serve it (release data is
    content: its id alone when content capture is off)."""
    if run.release is None:
        return {"release_id": ""}
    if not capture_content_default():
        return {"release_id": run.release.version}
    return {"release_id": run.release.version, **run.release.as_summary()}


def run_trace_outcome(run_id: Any, status: str) -> tuple[dict[str, Any], str | None]:
    """The root span's output (the run's status and the verdict it stored, with its state)
    and its error: the run's own for a run that did not succeed; "no verdict was stored" for
    one that stored nothing."""
    report = RiskReport.objects.filter(conversation_id=run_id).order_by("-filed_at", "-id").first()
    run = Conversation.objects.filter(pk=run_id).only("error", "outcome", "outcome_detail").first()
    verdict = None
    state = "no report"
    if report is not None:
        state = "stored for review" if report.needs_review else "filed"
        verdict = {
            "report_id": report.pk,
            "severity": report.counts_as,
            "model_severity": report.severity,
            "policy_severity": report.policy_severity or None,
            "needs_review": report.needs_review,
            "origin": report.origin,
        }
    # The run's own words for how it ended ("Stored for review: the model did not correct its
    # filing") say more than the report's flag, where the run recorded them.
    if run is not None and run.headline:
        state = run.headline
    output = {"run_status": status, "state": state, "verdict": verdict}
    if status != RunStatus.SUCCEEDED:
        error = run.error if run is not None else ""
        return output, f"the run {status}: {error}" if error else f"the run {status}"
    if report is None:
        return output, "no verdict was stored"
    return output, None
