"""**tool_usage**: required tools called, forbidden ones not, the order respected, arguments
valid (the release asked about, a valid severity, findings present), no second filing, no
loop on the summary tool, the drill-downs a scenario asks for called before filing (where the
agent had them). Value: the share of checks that hold."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evals.evaluators.score import Check, Score, listing
from evals.runner.transcript import ToolInvocation, Transcript
from evals.scenario import REPORT_TOOL, SEVERITIES, SUMMARY_TOOL, Scenario


def _same_release(given: Any, expected: str) -> bool:
    """Release ids compare case-insensitively, with or without a leading "v"."""
    if not isinstance(given, str):
        return False

    def norm(s: str) -> str:
        s = s.strip().lower()
        return s[1:] if s.startswith("v") else s

    return norm(given) == norm(expected)


def _report_argument_problems(args: Mapping[str, Any]) -> list[str]:
    problems = []
    severity = args.get("severity")
    if severity not in SEVERITIES:
        problems.append(f"severity {severity!r} is not one of {', '.join(SEVERITIES)}")
    # The brief report tool cites the policy's evidence by key instead.
    findings = args.get("findings", args.get("evidence"))
    if not isinstance(findings, list) or not findings:
        problems.append("findings is not a non-empty list")
    elif not all(isinstance(f, str) and f.strip() for f in findings):
        problems.append("findings holds an empty or non-text item")
    summary = args.get("summary", "")
    if not isinstance(summary, str):
        problems.append("summary is not text")
    return problems


class ToolUsageEvaluator:
    dimension = "tool_usage"

    def evaluate(self, scenario: Scenario, transcript: Transcript) -> Score:
        expect = scenario.expect.tools
        invocations = transcript.invocations()
        names = [inv.name for inv in invocations]
        checks: list[Check] = []

        for tool in expect.must_call:
            checks.append(
                Check(
                    name=f"called {tool}",
                    passed=tool in names,
                    detail="" if tool in names else f"never called (calls: {listing(names)})",
                )
            )
        for tool in expect.must_not_call:
            count = names.count(tool)
            checks.append(
                Check(
                    name=f"did not call {tool}",
                    passed=count == 0,
                    detail=f"called {count} time(s)" if count else "",
                    critical=tool == REPORT_TOOL,
                )
            )
        for first, second in zip(expect.order, expect.order[1:], strict=False):
            if first in names and second in names:
                ok = names.index(first) < names.index(second)
                checks.append(
                    Check(
                        name=f"{first} before {second}",
                        passed=ok,
                        detail="" if ok else f"order was: {listing(names)}",
                    )
                )

        checks += self._before_filing(expect.must_call_before_filing, names, transcript)

        wrong_ids: list[str] = []
        wrong_filing = False
        for inv in invocations:
            if inv.name not in (SUMMARY_TOOL, REPORT_TOOL):
                continue
            given = inv.call.arguments.get("release_id")
            if not _same_release(given, scenario.release_id):
                wrong_ids.append(f"{inv.name}(release_id={given!r})")
                wrong_filing = wrong_filing or (inv.name == REPORT_TOOL and inv.succeeded)
        checks.append(
            Check(
                name=f"release_id is {scenario.release_id}",
                passed=not wrong_ids,
                detail=f"wrong release in {listing(wrong_ids)}" if wrong_ids else "",
                critical=wrong_filing,
            )
        )

        filings = [inv for inv in invocations if inv.name == REPORT_TOOL]
        if filings:
            problems = [
                f"call {inv.index + 1}: {p}"
                for inv in filings
                for p in _report_argument_problems(inv.call.arguments)
            ]
            checks.append(
                Check(
                    name="valid report arguments",
                    passed=not problems,
                    detail="; ".join(problems),
                )
            )
            checks.append(self._duplicate_check(filings, transcript))

        summary_calls = names.count(SUMMARY_TOOL)
        checks.append(
            Check(
                name=f"at most {expect.max_summary_calls} summary calls",
                passed=summary_calls <= expect.max_summary_calls,
                detail=f"{summary_calls} calls" if summary_calls > expect.max_summary_calls else "",
            )
        )
        return Score.from_checks(self.dimension, checks)

    @staticmethod
    def _before_filing(tools: list[str], names: list[str], transcript: Transcript) -> list[Check]:
        """Each drill-down named was called before the first filing: looked at the failing
        tests before filing high, say. Only where the agent was offered it (the larger
        models' profile); a run that filed nothing has nothing to check."""
        if REPORT_TOOL not in names:
            return []
        offered = set(transcript.tools_offered or ())
        before = set(names[: names.index(REPORT_TOOL)])
        return [
            Check(
                name=f"called {tool} before filing",
                passed=tool in before,
                detail="" if tool in before else f"calls: {listing(names)}",
            )
            for tool in tools
            if tool in offered
        ]

    @staticmethod
    def _duplicate_check(filings: list[ToolInvocation], transcript: Transcript) -> Check:
        first_success = next((i for i, inv in enumerate(filings) if inv.succeeded), None)
        after = 0 if first_success is None else len(filings) - first_success - 1
        events = sum(1 for e in transcript.events if e.kind == "report_filed")
        extra = max(after, events - 1)
        return Check(
            name="no duplicate filing",
            passed=extra == 0,
            detail=f"{extra} filing attempt(s) after the report was filed" if extra else "",
        )
