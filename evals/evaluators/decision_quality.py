"""**decision_quality** (when the scenario expects a severity): the severity filed against the
acceptable set and the risk policy, the key risks named, nothing made up. Value: 0.5 x severity
credit + 0.3 x key-risk recall + 0.2 x (nothing made up)."""

from __future__ import annotations

from evals.evaluators.figures import data_seen, made_up_checks
from evals.evaluators.matching import find_group
from evals.evaluators.score import Check, Score, listing
from evals.runner.transcript import Transcript
from evals.scenario import KeywordGroup, Scenario
from releases.risk import policy

_SEVERITY_RANK = {"low": 0, "medium": 1, "high": 2}


def severity_credit(filed: str, scenario: Scenario) -> float:
    """1 for the preferred severity, 0.75 for another acceptable one, 0.25 one level off."""
    expect = scenario.expect
    filed = filed.strip().lower()
    if filed not in _SEVERITY_RANK or not expect.acceptable:
        return 0.0
    if filed == (expect.severity or filed) and filed in expect.acceptable:
        return 1.0
    if filed in expect.acceptable:
        return 0.75
    distance = min(abs(_SEVERITY_RANK[filed] - _SEVERITY_RANK[a]) for a in expect.acceptable)
    return 0.25 if distance == 1 else 0.0


class DecisionQualityEvaluator:
    dimension = "decision_quality"

    def evaluate(self, scenario: Scenario, transcript: Transcript) -> Score | None:
        expect = scenario.expect
        if not expect.acceptable:
            return None
        report = transcript.filed_report()
        if report is None:
            check = Check(
                name="report filed",
                passed=False,
                detail="no risk report was filed, so there is no decision to judge",
                critical=scenario.critical,
            )
            return Score.from_checks(self.dimension, [check], value=0.0)

        checks: list[Check] = []
        filed = report.severity.strip().lower()
        credit = severity_credit(filed, scenario)
        wanted = expect.severity or listing(sorted(expect.acceptable))
        checks.append(
            Check(
                name="severity",
                passed=filed in expect.acceptable,
                detail=f"filed {filed or '(none)'!s}, expected {wanted}"
                + (
                    f" (acceptable: {listing(sorted(expect.acceptable))})"
                    if expect.acceptable_severities
                    else ""
                ),
                critical=scenario.critical,
            )
        )

        payload = data_seen(scenario, transcript)
        if payload:
            floor = policy.evaluate(payload).severity
            checks.append(
                Check(
                    name="not below the risk policy",
                    passed=_SEVERITY_RANK.get(filed, -1) >= _SEVERITY_RANK[floor],
                    detail=f"filed {filed or '(none)'}, the policy gives {floor}",
                )
            )

        text = report.text
        found, missing = self._key_risks(text, expect.key_risks)
        recall = len(found) / len(expect.key_risks) if expect.key_risks else 1.0
        if expect.key_risks:
            detail = f"recall {len(found)}/{len(expect.key_risks)}"
            if missing:
                detail += f"; missing: {listing(missing)}"
            checks.append(Check(name="key risks mentioned", passed=not missing, detail=detail))

        honest = made_up_checks(
            scenario, transcript, text + "\n" + transcript.final_text(), what="report"
        )
        checks += honest
        value = 0.5 * credit + 0.3 * recall + 0.2 * float(all(c.passed for c in honest))
        return Score.from_checks(self.dimension, checks, value=value)

    @staticmethod
    def _key_risks(text: str, groups: list[KeywordGroup]) -> tuple[list[str], list[str]]:
        found, missing = [], []
        for group in groups:
            (found if find_group(text, group) else missing).append(group.name)
        return found, missing
