"""From a verdict (the JSON of `GET /api/releases/<version>/verdict`) to a pipeline's exit code
and a Markdown summary it can show as it is.

Exit codes:
- 0: the severity that counts is below the bar (`--fail-on`, high by default);
- 1: it is at or above the bar (`medium-known`: high, or a medium the release's data shows,
  not one that rests on missing fields alone);
- 2: the report waits for a person's decision (whatever its provisional severity);
- 3: no verdict: the wait ran out on an assessment of data a model had already judged, the
  release or the server could not be found, the server refused the token.

When no model has filed on the release's data as it is now (none configured or reachable, the
run failed, not run yet), the server's verdict is the policy's own (`source: "policy"`): "the
policy's verdict (no model assessment)", and the exit code follows its severity.

A usage error (an unknown option, `--wait nan`) is `USAGE` (64, BSD's EX_USAGE), apart from
the four a pipeline branches on.
"""

from __future__ import annotations

import re
from typing import Any

BELOW, AT_OR_ABOVE, WAITS_FOR_PERSON, NO_VERDICT = 0, 1, 2, 3
USAGE = 64
RANKS = {"low": 0, "medium": 1, "high": 2}
FAIL_ON = ("high", "medium-known", "medium")
POLICY_LABEL = "the policy's verdict (no model assessment)"
# While these last, `--wait` keeps asking.
PENDING_STATES = frozenset({"running", "not_assessed"})
JUDGED_STATES = frozenset({"assessed", "decided"})


def unavailable(version: str, problem: str, next_step: str) -> dict[str, Any]:
    """A verdict-shaped answer for when there is none to read (the server unreachable or
    refusing, no such release): the summary still says what happened and what to do."""
    return {
        "state": "unavailable",
        "state_label": "No verdict",
        "version": version,
        "severity": None,
        "problem": problem,
        "next_step": next_step,
    }


def next_step(verdict: dict[str, Any], waited_s: float) -> str | None:
    """What a person reading a job's summary does about a verdict that is not one yet."""
    state = verdict.get("state")
    if state in ("running", "queued"):
        return (
            f"The assessment was still running after {waited_s:g} s: re-run this job, or give "
            "`verdict` a longer `--wait`."
        )
    if state == "not_assessed":
        return "Never assessed: send it with `detective ingest ... --assess`, then ask again."
    if state == "failed":
        return "The assessment failed: open the release in Detective, reassess it, then re-run."
    if state == "needs_person":
        return (
            "A person decides on the review page; `verdict --wait-for-decision SECONDS` "
            "waits for them, or re-run this job once they have."
        )
    return None


def by_policy(verdict: dict[str, Any]) -> bool:
    """The severity is the policy's own: no model filed on the data the release has now."""
    return verdict.get("source") == "policy" and verdict.get("severity") in RANKS


def at_or_above(verdict: dict[str, Any], severity: str, fail_on: str) -> bool:
    """`medium-known` is the bar between high and medium: a medium the release's own data
    shows fails, one that rests on missing fields alone (no metrics sent: the server's
    `missing_data_only`) passes. A server that does not say counts every medium."""
    if fail_on == "medium-known":
        if severity == "medium" and verdict.get("missing_data_only") is True:
            return False
        fail_on = "medium"
    return RANKS[severity] >= RANKS[fail_on]


def exit_code(verdict: dict[str, Any], fail_on: str) -> int:
    state = verdict.get("state")
    if state == "needs_person":
        return WAITS_FOR_PERSON
    severity = verdict.get("severity")
    if not by_policy(verdict) and (state not in JUDGED_STATES or severity not in RANKS):
        return NO_VERDICT
    return AT_OR_ABOVE if at_or_above(verdict, severity, fail_on) else BELOW


def outcome(code: int, fail_on: str) -> str:
    return {
        BELOW: f"below the bar ({fail_on})",
        AT_OR_ABOVE: f"at or above the bar ({fail_on})",
        WAITS_FOR_PERSON: "waits for a person's decision",
        NO_VERDICT: "no verdict",
    }[code]


def one_line(verdict: dict[str, Any], service: str, fail_on: str) -> str:
    code = exit_code(verdict, fail_on)
    severity = verdict.get("severity") or "none"
    label = verdict.get("state_label") or verdict.get("state")
    if by_policy(verdict):
        label = f"{POLICY_LABEL} ({str(label).lower()})"
    return (
        f"{service} {verdict.get('version')}: severity {severity}, {label}: "
        f"{outcome(code, fail_on)} (exit {code})"
    )


# The findings and the summary are a model's words about data anyone could have written: in a
# pull-request comment they stay text (no links, images, HTML, headings or tables of their own).
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]()<>#|!~&])")


def _cell(text: object) -> str:
    flat = " ".join(str(text).split())
    return _MARKDOWN_SPECIAL.sub(r"\\\1", flat)


def markdown(verdict: dict[str, Any], service: str, fail_on: str) -> str:
    code = exit_code(verdict, fail_on)
    severity = verdict.get("severity")
    icon = {BELOW: "✅", AT_OR_ABOVE: "⛔", WAITS_FOR_PERSON: "⏸️", NO_VERDICT: "❔"}[code]
    title = f"{icon} Detective: {service} {verdict.get('version')}"
    lines = [f"### {_cell(title)}", ""]
    lines.append(f"- **Severity that counts:** {severity.upper() if severity else 'none'}")
    lines.append(f"- **State:** {_cell(verdict.get('state_label') or verdict.get('state'))}")
    if by_policy(verdict):
        lines.append(f"- **Verdict:** {POLICY_LABEL}")
    lines.append(f"- **Gate:** {outcome(code, fail_on)} (exit {code})")
    if verdict.get("tests"):
        # Tests and subtests apart, and how much of the usual suite ran when not all of it.
        lines.append(f"- **Tests:** {_cell(verdict['tests'])}")
    parts = [
        f"model {verdict['model_severity']}" if verdict.get("model_severity") else "",
        f"policy {verdict['policy_severity']}" if verdict.get("policy_severity") else "",
        f"policy version {verdict['policy_version']}" if verdict.get("policy_version") else "",
    ]
    if any(parts):
        lines.append(f"- **Filed:** {', '.join(part for part in parts if part)}")
    decision = verdict.get("decision")
    if isinstance(decision, dict) and decision.get("kind"):
        by = f" by {_cell(decision.get('by'))}" if decision.get("by") else ""
        reason = f": {_cell(decision.get('reason'))}" if decision.get("reason") else ""
        lines.append(f"- **Decision:** {_cell(decision['kind'])}{by}{reason}")
    if verdict.get("run_error"):
        lines.append(f"- **Run error:** {_cell(verdict['run_error'])}")
    if verdict.get("problem"):
        lines.append(f"- **Why:** {_cell(verdict['problem'])}")
    if verdict.get("next_step"):
        lines.append(f"- **What to do:** {_cell(verdict['next_step'])}")
    if verdict.get("summary"):
        lines += ["", _cell(verdict["summary"])]
    findings = verdict.get("findings") or []
    if findings:
        lines += ["", "**Findings**", ""]
        for finding in findings:
            ours = (
                " *(from the policy)*"
                if finding.get("from_policy") and not by_policy(verdict)
                else ""
            )
            lines.append(f"- {_cell(finding.get('text', ''))}{ours}")
            for evidence in finding.get("evidence") or []:
                lines.append(f"  - evidence: {_cell(evidence)}")
    suspects = verdict.get("suspects") or []
    if suspects:
        lines += ["", "**Suspect commits of new failures**", ""]
        lines += [f"- {_cell(sentence)}" for sentence in suspects]
    reasons = verdict.get("review_reasons") or []
    if reasons:
        lines += ["", "**Why a person must look**", ""]
        lines += [f"- {_cell(reason)}" for reason in reasons]
    if verdict.get("url"):
        lines += ["", f"[The release in Detective]({verdict['url']})"]
    return "\n".join(lines) + "\n"
