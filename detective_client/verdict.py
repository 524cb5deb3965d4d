"""From a verdict (the JSON of `GET /api/releases/<version>/verdict`) to a pipeline's exit code
and its one line (the Markdown summary is `summary.py`'s).

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
