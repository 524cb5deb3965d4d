"""The loop stops repeating itself (issue 40, item 3), through the real runner, the agent
`build_agent` composes, the release API in-process and the database; respx plays the model
over OpenAI's wire format. Measured on the local model: one run spent all 12 steps re-filing a
report refused for the same reason; one answered "214 failed tests" without calling a tool."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent.testing.fakes import call, reply
from releases.models import Release, ReportOrigin, RiskReport, RunStatus
from tests.unknown_evidence_test import (  # noqa: F401 (fixtures)
    LARGE,
    SMALL,
    VERSION,
    _close_thread_connections,
    _key,
    assess,
    full_filing,
    make_risky,
    summary_turn,
    tool_results,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def risky(make_release: Callable[..., Release]) -> Release:
    return make_risky(make_release)


def test_the_same_refusal_three_times_ends_in_the_policys_verdict_for_a_person(
    risky: Release,
) -> None:
    too_long = [full_filing(f"call_{n}", ["x" * (1200 + n)]) for n in range(11)]
    run, server = assess(risky, LARGE, [summary_turn(), *too_long])

    # The summary, then three filings: not the twelve steps the profile allows.
    assert len(server.requests) == 4
    first, second = tool_results(server, 2)[-1], tool_results(server, 3)[-1]
    assert "at most 1000 characters" in first and "second time" not in first
    assert "Exactly what is wrong: findings.0: String should have at most 1000" in second
    assert f'A call that passes looks like this: file_risk_report({{"release_id": "{VERSION}"' in (
        second
    )
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.outcome == "policy_verdict"
    report = RiskReport.objects.get(conversation=run)
    assert report.origin == ReportOrigin.POLICY and report.needs_review
    assert (report.severity, report.policy_severity) == ("high", "high")
    assert "its filing kept failing" in report.review_reasons[0]


def test_a_run_that_never_read_the_summary_cannot_file(risky: Release) -> None:
    unread = full_filing("call_1", ["12 failed tests, among them test_login."])
    run, server = assess(risky, LARGE, [unread, unread, unread, reply("Done.")])

    assert "has not been read in this assessment" in tool_results(server, 1)[-1]
    assert not RiskReport.objects.filter(conversation=run).exists()
    assert run.outcome == "no_report"


@pytest.mark.parametrize("model", [LARGE, SMALL])
def test_an_answer_in_words_is_nudged_once_to_call_a_tool(risky: Release, model: str) -> None:
    words = reply("214 failed tests: the risk is high.")
    small = model == SMALL
    filing = reply(
        "Filing.",
        call(
            "file_risk_report",
            "call_f",
            release_id=VERSION,
            severity="high",
            **({"evidence": ["E1"]} if small else {"findings": ["12 failed tests."]}),
        ),
    )
    turns = [words, filing] if small else [words, summary_turn(), filing]
    run, server = assess(risky, model, [*turns, reply("Filed.")])

    asked = server.requests[1]["messages"][-1]
    assert asked["role"] == "user" and "file_risk_report" in asked["content"]
    assert run.outcome == "filed", run.headline
    assert RiskReport.objects.get(conversation=run).severity == "high"
