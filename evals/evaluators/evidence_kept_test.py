from __future__ import annotations

import json

from agent.messages import Message, ToolCall
from evals.evaluators.decision_quality import DecisionQualityEvaluator
from evals.evaluators.evidence_kept import NAME, evidence_check
from evals.evaluators.trial import evaluate
from evals.runner.transcript import FiledReport, Transcript
from evals.scenario import Suite
from risk import policy
from risk.digest import digest

RELEASE = "v3.0.0"


def _transcript(
    summary: dict[str, object], findings: list[str], stored: FiledReport | None = None
) -> Transcript:
    read = ToolCall(id="s", name="get_release_summary", arguments={"release_id": RELEASE})
    filed = ToolCall(
        id="r",
        name="file_risk_report",
        arguments={"release_id": RELEASE, "severity": "high", "findings": findings},
    )
    return Transcript(
        messages=[
            Message(role="user", content=f"Assess the risk of release {RELEASE}."),
            Message(role="assistant", tool_calls=[read]),
            Message(role="tool", tool_call_id="s", name=read.name, content=json.dumps(summary)),
            Message(role="assistant", tool_calls=[filed]),
            Message(role="tool", tool_call_id="r", name=filed.name, content="Risk report filed."),
            Message(role="assistant", content="Filed."),
        ],
        report=stored,
    )


def _summary(suite: Suite, *, brief: bool = False) -> tuple[dict[str, object], list[str]]:
    payload = dict(suite.get("high_payment_failures").release_payload() or {})
    verdict = policy.evaluate(payload)
    shown = digest(payload, verdict, version=1, brief=brief)
    evidence = shown["policy"]["evidence"]
    return shown, list(evidence.values()) if isinstance(evidence, dict) else list(evidence)


def test_a_report_that_leaves_out_a_sentence_it_was_shown_fails_critically(
    suite: Suite,
) -> None:
    summary, evidence = _summary(suite)
    assert len(evidence) >= 3
    whole = evidence_check(_transcript(summary, [*evidence, "Payments were rewritten."]))
    assert whole is not None and whole.passed and whole.critical
    lost = evidence_check(_transcript(summary, evidence[:1]))
    assert lost is not None and not lost.passed and lost.critical
    assert all(repr(sentence) in lost.detail for sentence in evidence[1:])
    assert lost.detail.startswith(f"1/{len(evidence)}")


def test_the_check_reads_what_the_model_filed_not_the_report_the_api_completed(
    suite: Suite,
) -> None:
    # The stored report carries every sentence (the API added what the model left out); the
    # model's filing did not: the model is what the eval measures.
    summary, evidence = _summary(suite)
    stored = FiledReport(release_id=RELEASE, severity="high", findings=evidence)
    transcript = _transcript(summary, evidence[:1], stored)
    check = evidence_check(transcript)
    assert check is not None and not check.passed
    scenario = suite.get("high_payment_failures")
    score = DecisionQualityEvaluator().evaluate(scenario, transcript)
    assert score is not None and NAME in {c.name for c in score.failed_checks}
    result = evaluate(scenario, transcript)
    assert result.status == "failed"
    assert any(NAME in reason for reason in result.critical_failures)


def test_in_the_brief_view_the_keyed_sentences_are_what_the_policy_gave(suite: Suite) -> None:
    summary, evidence = _summary(suite, brief=True)
    assert isinstance(summary["policy"], dict) and isinstance(summary["policy"]["evidence"], dict)
    check = evidence_check(_transcript(summary, evidence))
    assert check is not None and check.passed
    assert not evidence_check(_transcript(summary, evidence[1:])).passed  # type: ignore[union-attr]


def test_no_summary_read_or_no_evidence_in_it_is_not_judged(suite: Suite) -> None:
    assert evidence_check(_transcript({"version": RELEASE}, ["Looks fine."])) is None
    assert evidence_check(Transcript()) is None
