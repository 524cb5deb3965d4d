"""**decision_quality** (when the scenario expects a severity): the severity filed against the
acceptable set and the risk policy, the key risks named, nothing made up, nothing the
release API would flag (its own check of a filing, `risk/filing.py`), and none of the policy's
evidence left out (`evidence_kept.py`, a critical check). Value: 0.5 x severity credit + 0.3 x
key-risk recall (the culprit commit counting as one more, for a scenario that declares one:
`culprit_named.py`) + 0.2 x (nothing made up, flagged or left out)."""

from __future__ import annotations

from typing import Any

from evals.evaluators.culprit_named import culprit_check
from evals.evaluators.evidence_kept import evidence_check
from evals.evaluators.figures import data_seen, made_up_checks
from evals.evaluators.matching import find_group
from evals.evaluators.score import Check, Score, listing
from evals.runner.transcript import FiledReport, Transcript
from evals.scenario import KeywordGroup, Scenario
from risk import filing, policy
from risk.digest import digest
from risk.policy import PolicyVerdict

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
        flagged: list[Check] = []
        if payload:
            verdict = policy.evaluate(payload)
            floor = verdict.severity
            # Where the API recorded its policy's severity, that is the floor it applied: for a
            # release made of files, judged with its history (a known-flaky failure lowers it,
            # a failure beside the changed code raises it), which the summary alone does not show.
            recorded = (report.policy_severity or "").strip().lower()
            if recorded in _SEVERITY_RANK:
                floor = recorded
            checks.append(
                Check(
                    name="not below the risk policy",
                    passed=_SEVERITY_RANK.get(filed, -1) >= _SEVERITY_RANK[floor],
                    detail=f"filed {filed or '(none)'}, the policy gives {floor}",
                )
            )
            flagged.append(self._api_check(report, payload, verdict, scenario))

        text = report.text
        found, missing = self._key_risks(text, expect.key_risks)
        recall = len(found) / len(expect.key_risks) if expect.key_risks else 1.0
        if expect.key_risks:
            detail = f"recall {len(found)}/{len(expect.key_risks)}"
            if missing:
                detail += f"; missing: {listing(missing)}"
            checks.append(Check(name="key risks mentioned", passed=not missing, detail=detail))
        culprit = culprit_check(scenario, transcript)
        if culprit is not None:
            # The culprit counts as one more thing the report must name.
            named = len(found) + culprit.passed
            recall = named / (len(expect.key_risks) + 1)
            checks.append(culprit)

        # A release made of files was grounded by the API with its history, which the summary
        # re-judged here lacks: the API's recorded problems are the check below.
        honest = made_up_checks(
            scenario,
            transcript,
            text + "\n" + transcript.final_text(),
            what="report",
            grounded_elsewhere=text if _api_knew_more(scenario, report) else "",
        )
        kept = evidence_check(transcript)
        if kept is not None:
            flagged.append(kept)
        checks += honest + flagged
        clean = all(c.passed for c in [*honest, *flagged])
        value = 0.5 * credit + 0.3 * recall + 0.2 * float(clean)
        return Score.from_checks(self.dimension, checks, value=value)

    @staticmethod
    def _api_check(
        report: FiledReport, payload: dict[str, Any], verdict: PolicyVerdict, scenario: Scenario
    ) -> Check:
        """The release API's own judgement of this filing (`risk/filing.py`): a
        report it would refuse or send to a person fails here too. The severity against the
        policy's floor is the check above; the rest (grounding, claims, missing data left
        unsaid, orders in the data left unsaid) is this one."""
        if _api_knew_more(scenario, report):
            assert report.problems is not None
            # The API's own findings when it kept the report: for a scenario made of files it
            # judged with the release's history (the metric judge's medians, known-flaky
            # tests), which the summary re-judged here does not show.
            problems = [p for p in report.problems if not p.startswith("severity ")]
            return Check(
                name="nothing the API would flag", passed=not problems, detail="; ".join(problems)
            )
        severity = report.severity.strip().lower()
        decision = filing.decide(
            severity=severity if severity in _SEVERITY_RANK else "low",
            findings=report.findings,
            summary=report.summary,
            data=payload,
            verdict=verdict,
            refused_before=True,
            shown=digest(payload, verdict, version=None),
            summary_read=True,
        )
        problems = [p for p in decision.problems if not p.startswith("severity ")]
        return Check(
            name="nothing the API would flag",
            passed=not problems,
            detail="; ".join(problems),
        )

    @staticmethod
    def _key_risks(text: str, groups: list[KeywordGroup]) -> tuple[list[str], list[str]]:
        found, missing = [], []
        for group in groups:
            (found if find_group(text, group) else missing).append(group.name)
        return found, missing


def _api_knew_more(scenario: Scenario, report: FiledReport) -> bool:
    """Did the API judge this report with more than the summary shows (a release made of
    files, with its history), and record what it found?"""
    return scenario.sources is not None and report.problems is not None
