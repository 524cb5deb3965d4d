"""The receivers of releases' signals (connected in `WebhooksConfig.ready`)."""

from __future__ import annotations

from typing import Any

from releases.models import ReviewDecision, RiskReport
from webhooks.models import Event
from webhooks.tasks import queue_event


def on_verdict_filed(sender: type, report: RiskReport, **_: Any) -> None:
    queue_event(report.release, Event.FILED)


def on_verdict_decided(sender: type, decision: ReviewDecision, **_: Any) -> None:
    queue_event(decision.report.release, Event.DECIDED)
