from __future__ import annotations

from agent.messages import Message, ToolCall, ToolResult
from evals.evaluators.figures import ungrounded
from evals.runner.transcript import Transcript
from evals.scenario import Suite
from tests.transcripts import TESTDATA, case


def test_the_evaluator_checks_figures_against_the_data_the_agent_saw(suite: Suite) -> None:
    scenario = suite.get("low_clean_docs")
    blind = Transcript(messages=[Message.user(scenario.prompt)])
    _, seen = case(TESTDATA / "good_low_clean.json")
    assert ungrounded(scenario, seen, "150 tests passed") == []
    assert ungrounded(scenario, blind, "150 tests passed")  # it never read them
    assert ungrounded(scenario, seen, "2 payment tests failing")  # 0 failed


def test_a_refusal_quoting_the_report_does_not_make_its_figures_known(suite: Suite) -> None:
    scenario = suite.get("low_clean_docs")
    _, seen = case(TESTDATA / "good_low_clean.json")
    refusal = ToolResult(
        tool_call_id="r1",
        name="file_risk_report",
        content="Not filed: 'The error rate reached 42.7%' is not in the release data",
        success=False,
    )
    transcript = Transcript(messages=[*seen.messages, Message.tool(refusal)])
    assert ungrounded(scenario, transcript, "The error rate reached 42.7%")


def test_each_line_is_grounded_on_its_own_as_the_api_grounds_each_finding(suite: Suite) -> None:
    scenario = suite.get("missing_tests_field")  # no test results; one change in payments
    read = ToolCall(id="c1", name="get_release_summary", arguments={"release_id": "v4.0.0"})
    summary = ToolResult(tool_call_id="c1", name="get_release_summary", content="{}", success=True)
    seen = Transcript(
        messages=[
            Message.user(scenario.prompt),
            Message.assistant(tool_calls=[read]),
            Message.tool(summary),
        ]
    )
    findings = "missing from the release data: the test results\n1 change in payments"
    assert ungrounded(scenario, seen, findings) == []
    # Within one line a count right after the test results is still read as a test count.
    assert ungrounded(scenario, seen, "the test results 1 change in payments")
