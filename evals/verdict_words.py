"""A comparison's verdict in words: the sentence a banner shows, and per scenario what moved.

Plain Python over `evals.compare.Comparison` (no Django), so the pages, the Markdown report
and the tests read the same words. Rules for the words:

- regressions are counted per scenario (a scenario whose pass rate and decision-quality score
  both regressed is one regressed scenario, with both dimensions listed under it);
- a scenario whose trials all errored says "errored now", never "unchanged";
- one unit per figure: pass rates as counts of trials ("passed 3 of 3 before, 1 of 3 now"),
  scores as scores from 0 to 1 ("decision quality 1.00 -> 0.33"); no p-values in a sentence.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from evals.compare import Change, Comparison, ScenarioDelta

ARROW = "\u2192"
NAMED = 3  # scenarios named in the headline; the rest are counted


@dataclass(frozen=True)
class ScenarioWords:
    """One scenario that moved: its sentence and the figures under it."""

    scenario_id: str
    critical: bool
    status: str
    sentence: str  # "passed 1 of 1 before, errored now"
    dimensions: list[str] = field(default_factory=list)  # "decision quality 1.00 -> 0.00"


def dimension_name(key: str) -> str:
    return "LLM judge" if key == "judge" else key.replace("_", " ")


def _counts(delta: ScenarioDelta) -> str:
    before = delta.baseline_counts
    now = delta.current_counts
    if before is None or now is None:
        return ""
    if delta.errored_now:
        return f"passed {before[0]} of {before[1]} before, errored now"
    return f"passed {before[0]} of {before[1]} before, {now[0]} of {now[1]} now"


def _dimension_line(change: Change) -> str:
    dimension = change.key.split("/", 1)[1] if "/" in change.key else change.key
    return f"{dimension_name(dimension)} {change.baseline:.2f} {ARROW} {change.current:.2f}"


def scenario_words(delta: ScenarioDelta) -> ScenarioWords:
    return ScenarioWords(
        scenario_id=delta.scenario_id,
        critical=delta.critical,
        status=delta.status,
        sentence=_counts(delta),
        dimensions=[_dimension_line(c) for c in delta.changes if c.metric == "score"],
    )


def moved(comparison: Comparison) -> list[ScenarioWords]:
    """Every scenario that regressed, errored, dropped or rose, in the comparison's order."""
    return [
        scenario_words(d)
        for d in comparison.scenarios
        if d.status not in ("unchanged", "added", "removed")
    ]


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _named(deltas: list[ScenarioDelta]) -> str:
    parts = [f"{d.scenario_id} {_counts(d)}" for d in deltas[:NAMED]]
    if len(deltas) > NAMED:
        parts.append(f"and {len(deltas) - NAMED} more")
    return "; ".join(parts)


def _run_level(changes: list[Change]) -> str:
    """The run's own figures that moved: its pooled pass rate and its dimensions."""
    parts = []
    for change in changes:
        if change.scope == "run":
            parts.append(f"the pass rate {change.baseline:.0%} {ARROW} {change.current:.0%}")
        elif change.scope == "dimension":
            parts.append(_dimension_line(change))
    return ", ".join(parts)


def headline(comparison: Comparison) -> str:
    """The verdict as one sentence, e.g. "Fails: 1 critical scenario regressed:
    summary_http_500 passed 1 of 1 before, errored now"."""
    c = comparison
    threshold = f"{c.rules.min_delta * 100:.0f} points"
    if c.verdict == "fail":
        scenarios = c.regressed_scenarios
        if scenarios:
            critical = [d for d in scenarios if d.critical]
            if len(critical) == len(scenarios):
                what = f"{len(critical)} critical scenario{'s' if len(critical) != 1 else ''}"
            elif critical:
                what = f"{_plural(len(scenarios), 'scenario')} ({len(critical)} critical)"
            else:
                what = _plural(len(scenarios), "scenario")
            ordered = critical + [d for d in scenarios if not d.critical]
            return f"Fails: {what} regressed: {_named(ordered)}"
        return f"Fails: the run as a whole regressed: {_run_level(c.regressions)}"
    if c.verdict == "marginal":
        dropped = [d for d in c.scenarios if d.status == "drop"]
        errored = [d for d in c.scenarios if d.status == "errored"]
        parts = []
        if dropped:
            parts.append(
                f"{_plural(len(dropped), 'scenario')} dropped by more than {threshold}, "
                f"possibly noise: {_named(dropped)}"
            )
        if errored:
            parts.append(
                f"{_plural(len(errored), 'scenario')} errored in every trial, so not "
                f"measured: {', '.join(d.scenario_id for d in errored)}"
            )
        run_drops = _run_level(c.drops)
        if not parts and run_drops:
            parts.append(f"the run dropped, possibly noise: {run_drops}")
        if not parts:
            parts.append(c.reasons[0] if c.reasons else "nothing to compare")
        return "Marginal: " + "; ".join(parts)
    common = sum(1 for d in c.scenarios if d.status not in ("added", "removed"))
    return (
        f"Passes: no scenario dropped by more than {threshold} "
        f"({_plural(common, 'scenario')} compared)"
    )


def caveats(comparison: Comparison) -> list[str]:
    """What weakens the verdict: too many errored trials, scenarios changed or one-sided."""
    notes = [r for r in comparison.reasons if "errored (more than" in r]
    return notes + list(comparison.notes)
