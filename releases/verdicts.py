"""The risk policy on the Django side: the version in force, and its verdict on a summary.

The rules themselves are plain code in `risk/`; this module finds their inputs in the
database (the policy version, the previous release's p95). A stored release is judged with its
history, which the sources app keeps: `sources.judging.judge_release`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db.models import JSONField, QuerySet, Subquery

from releases.models import Conversation, Message, Release, RiskPolicy
from releases.release_order import earlier_releases
from risk.digest import digest
from risk.history import EMPTY as EMPTY_HISTORY
from risk.history import History
from risk.policy import PolicySettings, PolicyVerdict, evaluate


@dataclass(frozen=True, slots=True)
class Judged:
    """A release summary with the policy's verdict on it, under one policy version."""

    policy: RiskPolicy
    settings: PolicySettings
    verdict: PolicyVerdict
    summary: dict[str, Any]
    history: History = EMPTY_HISTORY

    def for_agent(self, *, brief: bool = False) -> dict[str, Any]:
        """What the release API serves the agent; `brief`: the view of `?view=brief`."""
        return digest(
            self.summary,
            self.verdict,
            version=self.policy.version,
            cfg=self.settings,
            history=self.history,
            brief=brief,
        )


def current_policy() -> RiskPolicy:
    """The newest policy version; version 1 (the defaults) if the table was emptied."""
    policy = RiskPolicy.objects.order_by("-version").first()
    if policy is None:
        policy, _ = RiskPolicy.objects.get_or_create(
            version=1, defaults={"thresholds": PolicySettings().model_dump(mode="json")}
        )
    return policy


def with_policy_in_force(releases: QuerySet[Release]) -> QuerySet[Release]:
    """The releases with the policy in force read in their own statement (three scalar
    subqueries on the policy's version index): judging one of them then reads no policy of
    its own (`policy_in_force`). The summary API's budget is 6 queries."""
    newest = RiskPolicy.objects.order_by("-version")
    return releases.annotate(
        policy_in_force_id=Subquery(newest.values("pk")[:1]),
        policy_in_force_version=Subquery(newest.values("version")[:1]),
        policy_in_force_thresholds=Subquery(
            newest.values("thresholds")[:1], output_field=JSONField()
        ),
    )


def policy_in_force(release: Release) -> RiskPolicy:
    """The policy in force: the one read with the release (`with_policy_in_force`), else read
    now. The one read with it is for reading (its id, version and thresholds), never saved."""
    pk = getattr(release, "policy_in_force_id", None)
    if pk is None:
        return current_policy()
    return RiskPolicy(
        pk=pk,
        version=release.policy_in_force_version,  # type: ignore[attr-defined]
        thresholds=release.policy_in_force_thresholds,  # type: ignore[attr-defined]
    )


def settings_of(policy: RiskPolicy) -> PolicySettings:
    return PolicySettings.model_validate(policy.thresholds or {})


def previous_p95(release: Release) -> float | None:
    """The p95 of the service's release before this one (by deploy order), when it was
    measured. Another service's release says nothing of this one's latency: measured, a
    200 -> 260 ms p95 taken from an unrelated release made a clean release medium."""
    previous = (
        earlier_releases(release)
        .exclude(deployment_metrics=None)
        .values_list("deployment_metrics", flat=True)
        .first()
    )
    return p95_of(previous)


def p95_of(metrics: Any) -> float | None:
    if not isinstance(metrics, dict):
        return None
    value = metrics.get("response_time_p95")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def judge_summary(
    summary: dict[str, Any],
    *,
    previous: float | None = None,
    history: History | Callable[[PolicySettings], History] | None = None,
) -> Judged:
    """The policy's verdict on a summary; `history` is the release's past, or how to read it
    under the policy's settings (its window)."""
    policy = current_policy()
    settings = settings_of(policy)
    past = history(settings) if callable(history) else history or History.empty()
    verdict = evaluate(summary, settings, previous_p95=previous, history=past)
    return Judged(policy, settings, verdict, summary, past)


# The agent's tool that reads a release's summary (agent/tools/release_tools.py), and its
# investigation tools (agent/tools/drilldown.py, observability.py), whose results a report may
# cite.
SUMMARY_TOOL = "get_release_summary"
DRILL_DOWN_TOOLS = (
    "get_test_details",
    "get_code_changes",
    "get_metric_history",
    "get_failure_suspects",
    "get_observability_traces",
)
MAX_DRILL_DOWNS_READ = 20


def drill_downs_shown(run: Conversation) -> list[Any]:
    """What this run's drill-down calls showed the model (their JSON, failures left out): a
    report may cite its figures as it cites the summary's."""
    rows = Message.objects.filter(
        conversation=run, role=Message.Role.TOOL, metadata__tool_name__in=DRILL_DOWN_TOOLS
    ).values_list("content", "metadata")[:MAX_DRILL_DOWNS_READ]
    shown = []
    for content, metadata in rows:
        if (metadata or {}).get("is_error"):
            continue
        try:
            shown.append(json.loads(content))
        except ValueError:
            continue
    return shown


def read_the_summary(run: Conversation) -> bool:
    """Did this run obtain its release's summary (a get_release_summary call that did not
    fail)? A report saying the data could not be read is checked against this."""
    results = Message.objects.filter(
        conversation=run, role=Message.Role.TOOL, metadata__tool_name=SUMMARY_TOOL
    ).values_list("metadata", flat=True)
    return any(not (metadata or {}).get("is_error") for metadata in results)
