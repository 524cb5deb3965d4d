from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from releases.models import Release, ReviewDecision, RiskReport
from releases.release_verdict import verdict_of
from releases.selectors import reports_with_severity_shown, with_severity_shown
from releases.severity import higher, severity_that_counts

SEVERITIES = ("low", "medium", "high")


def test_the_rule_in_words() -> None:
    # A person's decision wins, whatever the model and the policy said.
    assert (
        severity_that_counts(filed="high", policy="high", needs_review=True, decided="low") == "low"
    )
    # Waiting for review: the higher of the two.
    assert (
        severity_that_counts(filed="low", policy="high", needs_review=True, decided=None) == "high"
    )
    assert (
        severity_that_counts(filed="high", policy="low", needs_review=True, decided=None) == "high"
    )
    # Not waiting: the filed one.
    assert (
        severity_that_counts(filed="low", policy="high", needs_review=False, decided=None) == "low"
    )
    # No report, no severity; a report without a policy verdict keeps its own.
    assert severity_that_counts(filed=None, policy=None, needs_review=False, decided=None) is None
    assert (
        severity_that_counts(filed="medium", policy="", needs_review=True, decided=None) == "medium"
    )


def test_higher() -> None:
    assert higher("low", "medium") == "medium"
    assert higher("high", "") == "high"
    assert higher(None, None) is None


COMBINATIONS = list(
    itertools.product(SEVERITIES, (*SEVERITIES, ""), (False, True), (None, *SEVERITIES))
)


@pytest.mark.django_db
def test_the_function_and_the_query_agree_on_every_combination(
    make_release: Callable[..., Release],
) -> None:
    expected: dict[int, str | None] = {}
    releases: dict[int, str | None] = {}
    for index, (filed, policy, needs_review, decided) in enumerate(COMBINATIONS):
        release = make_release(f"v{index}.0.0")
        report = RiskReport.objects.create(
            release=release, severity=filed, policy_severity=policy, needs_review=needs_review
        )
        if decided is not None:
            ReviewDecision.objects.create(
                report=report,
                decision="accept" if decided == filed else "override",
                severity=decided,
                reason="" if decided == filed else "looked",
                model_severity=filed,
            )
        expected[report.pk] = severity_that_counts(
            filed=filed, policy=policy, needs_review=needs_review, decided=decided
        )
        releases[release.pk] = expected[report.pk]
    # A release no model assessed counts with the gate's verdict: the policy's on its data.
    unassessed = make_release("v999.0.0")
    by_policy = verdict_of(unassessed)
    assert by_policy.report_id is None and by_policy.policy_severity is not None
    releases[unassessed.pk] = by_policy.severity

    shown = dict(
        reports_with_severity_shown(RiskReport.objects.all()).values_list("pk", "severity_shown")
    )
    assert shown == expected
    counted = dict(
        with_severity_shown(Release.objects.all()).values_list("pk", "effective_severity")
    )
    assert counted == releases
    # Not a trivial agreement: the rule does pick the policy's, the decision's and the filed.
    assert {"low", "medium", "high"} <= set(expected.values())
