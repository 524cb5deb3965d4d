"""**error_handling**: the run completed; for a failure scenario, no report, the failure said
plainly and nothing made up; otherwise every tool failure recovered from, and a report filed
even when some data is missing. Value: the share of checks that hold."""

from __future__ import annotations

from evals.evaluators.figures import made_up_checks
from evals.evaluators.matching import find_group
from evals.evaluators.score import Check, Score, listing
from evals.runner.transcript import Transcript
from evals.scenario import Scenario


def _completion_check(transcript: Transcript) -> Check:
    error = transcript.run_error()
    if error is not None:
        return Check(
            name="run completed",
            passed=False,
            detail=f"{error.error_type}: {error.message}".strip(": "),
        )
    reason = transcript.finish_reason()
    if reason == "max_steps":
        return Check(name="run completed", passed=False, detail="stopped at the step limit")
    if reason == "output_limit":
        return Check(
            name="run completed", passed=False, detail="the answer was cut off at the output limit"
        )
    if reason == "tool_failing":
        # A controlled ending, saying why: whether stopping was right is for the other checks.
        return Check(name="run completed", passed=True, detail="stopped: a tool kept failing")
    if reason is None:
        return Check(name="run completed", passed=False, detail="the run has no ending")
    return Check(name="run completed", passed=True)


class ErrorHandlingEvaluator:
    dimension = "error_handling"

    def evaluate(self, scenario: Scenario, transcript: Transcript) -> Score:
        checks = [_completion_check(transcript)]
        if scenario.is_failure_scenario:
            checks += self._failure_checks(scenario, transcript)
        else:
            checks += self._assessment_checks(scenario, transcript)
        return Score.from_checks(self.dimension, checks)

    @staticmethod
    def _failure_checks(scenario: Scenario, transcript: Transcript) -> list[Check]:
        checks: list[Check] = []
        report = transcript.filed_report()
        what = "does not exist" if scenario.kind == "missing_release" else "summary failed"
        if scenario.expect.report_forbidden:
            checks.append(
                Check(
                    name="no report filed",
                    passed=report is None,
                    detail=f"a {report.severity} report was filed although the release {what}"
                    if report
                    else "",
                    critical=True,
                )
            )
        final = transcript.final_text()
        group = scenario.expect.failure_mentions
        if group is not None:
            phrase = find_group(final, group)
            checks.append(
                Check(
                    name="failure stated plainly",
                    passed=phrase is not None,
                    detail=f"said {phrase!r}"
                    if phrase
                    else f"final answer does not say it: {final[:160]!r}",
                )
            )
        text = final + ("\n" + report.text if report else "")
        checks += made_up_checks(scenario, transcript, text, what="answer")
        return checks

    @staticmethod
    def _assessment_checks(scenario: Scenario, transcript: Transcript) -> list[Check]:
        checks: list[Check] = []
        invocations = transcript.invocations()
        failed_tools = {
            i.name for i in invocations if i.result is not None and not i.result.success
        }
        succeeded = {i.name for i in invocations if i.succeeded}
        unrecovered = sorted(failed_tools - succeeded)
        if failed_tools:
            checks.append(
                Check(
                    name="recovered from tool failures",
                    passed=not unrecovered,
                    detail=f"never succeeded: {listing(unrecovered)}" if unrecovered else "",
                )
            )
        if scenario.missing_fields and scenario.expect.report_required:
            filed = transcript.filed_report() is not None
            checks.append(
                Check(
                    name="degraded gracefully on missing data",
                    passed=filed,
                    detail=""
                    if filed
                    else f"gave up: no report although only "
                    f"{listing(scenario.missing_fields)} was missing",
                )
            )
        return checks
