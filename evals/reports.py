"""Reports of a run (and of its comparison with a baseline): JSON for machines, Markdown for
people.

The JSON follows the design specification's format, with more fields alongside:

```json
{
  "format_version": 1,
  "run": {"id": "42", "label": "...", "suite_version": "1.0.0", "trials_per_scenario": 3, ...},
  "summary": {"pass_rate": 0.85, "total_scenarios": 26,
              "avg_scores": {"tool_usage": 0.92, "decision_quality": 0.81, ...},
              "pass_rate_ci": [0.78, 0.9], "score_cis": {...}, "pass_hat_k": 0.77,
              "passed": 60, "failed": 11, "errored": 7, "tokens": {...}, "cost_usd": 0.41,
              "latency_ms": {...}},
  "scenarios": [{"id": "high_payment_failures", "status": "passed", "scores": {...}, ...}],
  "regression_analysis": {"verdict": "pass", "regressions": [...], "improvements": [...], ...}
}
```

Without a comparison, `regression_analysis` holds empty lists and a null verdict.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from evals.compare import Change, Comparison, DeltaStat
from evals.stats import Interval, MeanStat, RunSummary, ScenarioSummary

FORMAT_VERSION = 1


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def _ci(interval: Interval | None) -> list[float] | None:
    return interval.as_list() if interval is not None else None


def _mean(stat: MeanStat | None) -> dict[str, Any] | None:
    if stat is None:
        return None
    return {"mean": _r(stat.mean), "ci": _ci(stat.ci), "n": stat.n}


def _scenario_json(s: ScenarioSummary) -> dict[str, Any]:
    return {
        "id": s.scenario_id,
        "title": s.title,
        "status": s.status,
        "critical": s.critical,
        "tags": s.tags,
        "trials": s.trials,
        "passed": s.passed,
        "failed": s.failed,
        "errored": s.errored,
        "pass_rate": _r(s.pass_rate),
        "pass_rate_ci": _ci(s.pass_rate_ci),
        "pass_all": s.pass_all,
        "scores": {d: _r(stat.mean) for d, stat in s.scores.items()},
        "score_cis": {d: _ci(stat.ci) for d, stat in s.scores.items()},
        "severities": s.severities,
        "failure_reasons": s.failure_reasons,
        "tokens": {"input": s.input_tokens, "output": s.output_tokens},
        "cost_usd": _r(s.cost_usd, 6),
        "latency_ms": _mean(s.latency_ms),
        "fingerprint": s.fingerprint,
    }


def _delta_json(d: DeltaStat) -> dict[str, Any]:
    return {
        "baseline": _r(d.baseline),
        "current": _r(d.current),
        "delta": _r(d.delta),
        "p_value": _r(d.p_value),
    }


def _change_json(c: Change) -> dict[str, Any]:
    return {
        "scope": c.scope,
        "key": c.key,
        "metric": c.metric,
        "baseline": _r(c.baseline),
        "current": _r(c.current),
        "delta": _r(c.delta),
        "p_value": _r(c.p_value),
        "significant": c.significant,
        "critical": c.critical,
        "message": c.message,
    }


def _analysis_json(comparison: Comparison | None) -> dict[str, Any]:
    if comparison is None:
        return {"baseline_run_id": None, "verdict": None, "regressions": [], "improvements": []}
    return {
        "baseline_run_id": comparison.baseline_run_id,
        "baseline_label": comparison.baseline_label,
        "verdict": comparison.verdict,
        "reasons": comparison.reasons,
        "notes": comparison.notes,
        "rules": comparison.rules.model_dump(),
        "pass_rate": _delta_json(comparison.pass_rate),
        "dimension_deltas": {d: _delta_json(s) for d, s in comparison.dimensions.items()},
        "regressions": [_change_json(c) for c in comparison.regressions],
        "improvements": [_change_json(c) for c in comparison.improvements],
        "drops": [_change_json(c) for c in comparison.drops],
        "rises": [_change_json(c) for c in comparison.rises],
        "scenario_deltas": [
            {
                "id": d.scenario_id,
                "status": d.status,
                "critical": d.critical,
                "pass_rate": _delta_json(d.pass_rate),
                "baseline_counts": d.baseline_counts,
                "current_counts": d.current_counts,
                "scores": {dim: _delta_json(s) for dim, s in d.scores.items()},
                "fingerprint_changed": d.fingerprint_changed,
            }
            for d in comparison.scenarios
        ],
        "added": comparison.added,
        "removed": comparison.removed,
    }


def json_report(run: RunSummary, comparison: Comparison | None = None) -> dict[str, Any]:
    dims = run.dimensions
    latency = run.latency_ms
    return {
        "format_version": FORMAT_VERSION,
        "run": {
            "id": run.run_id,
            "label": run.label,
            "suite_version": run.suite_version,
            "created_at": run.created_at.isoformat() if run.created_at else None,
            "trials_per_scenario": run.k,
            "metadata": run.metadata,
        },
        "summary": {
            "pass_rate": _r(run.pass_rate),
            "total_scenarios": run.total_scenarios,
            "avg_scores": {d: _r(stat.mean) for d, stat in dims.items()},
            "mean_score": _r(run.mean_score),
            "pass_rate_ci": _ci(run.pass_rate_ci),
            "score_cis": {d: _ci(stat.ci) for d, stat in dims.items()},
            "pass_hat_k": _r(run.pass_hat_k),
            "k": run.k,
            "total_trials": run.total_trials,
            "passed": run.passed,
            "failed": run.failed,
            "errored": run.errored,
            "tokens": {
                "input": run.input_tokens,
                "output": run.output_tokens,
                "total": run.input_tokens + run.output_tokens,
            },
            "cost_usd": _r(run.cost_usd, 6),
            "latency_ms": _mean(latency),
        },
        "scenarios": [_scenario_json(s) for s in run.scenarios],
        "regression_analysis": _analysis_json(comparison),
    }


# --------------------------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------------------------


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
    ]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return lines


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _pct_ci(value: float | None, interval: Interval | None) -> str:
    if value is None:
        return "-"
    if interval is None:
        return _pct(value)
    return f"{value:.0%} ({interval.low:.0%}-{interval.high:.0%})"


def _num(value: float | None, fmt: str = ".2f") -> str:
    return "-" if value is None else format(value, fmt)


def _signed(value: float | None, pct: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.0%}" if pct else f"{value:+.2f}"


def _changes_table(changes: list[Change]) -> list[str]:
    rows = [
        [
            c.scope.replace("_", " "),
            c.key,
            c.metric.replace("_", " "),
            _pct(c.baseline) if c.metric == "pass_rate" else _num(c.baseline),
            _pct(c.current) if c.metric == "pass_rate" else _num(c.current),
            _signed(c.delta, pct=c.metric == "pass_rate"),
            _num(c.p_value, ".3f"),
            "yes" if c.critical else "",
        ]
        for c in changes
    ]
    header = ["Scope", "What", "Metric", "Baseline", "Current", "Δ", "p", "Critical"]
    return _table(header, rows)


def markdown_report(run: RunSummary, comparison: Comparison | None = None) -> str:
    title = run.label or (f"run {run.run_id}" if run.run_id else "evaluation run")
    lines = [f"# Evaluation report: {title}", ""]
    facts = [f"suite {run.suite_version or '?'}", f"{run.k} trial(s) per scenario"]
    if run.created_at:
        facts.append(run.created_at.strftime("%Y-%m-%d %H:%M UTC"))
    facts += [f"{k}: {v}" for k, v in run.metadata.items() if isinstance(v, str | int | float)]
    lines += [" · ".join(facts), ""]

    if comparison is not None:
        against = comparison.baseline_label or comparison.baseline_run_id or "the baseline"
        lines += [f"## Verdict: **{comparison.verdict.upper()}** (against {against})", ""]
        lines += [f"- {r}" for r in comparison.reasons]
        lines += [f"- note: {n}" for n in comparison.notes]
        lines.append("")

    latency = run.latency_ms
    lines += ["## Summary", ""]
    lines += _table(
        ["Metric", "Value"],
        [
            ["Pass rate (95% CI)", _pct_ci(run.pass_rate, run.pass_rate_ci)],
            [f"pass^{run.k} (scenarios passing every trial)", _pct(run.pass_hat_k)],
            ["Mean score (over dimensions)", _num(run.mean_score)],
            ["Scenarios", run.total_scenarios],
            [
                "Trials: passed / failed / errored",
                f"{run.passed} / {run.failed} / {run.errored}",
            ],
            ["Tokens (input + output)", f"{run.input_tokens:,} + {run.output_tokens:,}"],
            ["Cost", "-" if run.cost_usd is None else f"${run.cost_usd:.4f}"],
            ["Mean latency", "-" if latency is None else f"{latency.mean / 1000:.1f} s"],
        ],
    )
    lines.append("")

    lines += ["## Scores by dimension", ""]
    dim_rows = []
    for dim, stat in run.dimensions.items():
        row: list[Any] = [
            dim,
            _num(stat.mean),
            "-" if stat.ci is None else f"{stat.ci.low:.2f}-{stat.ci.high:.2f}",
            stat.n,
        ]
        if comparison is not None:
            d = comparison.dimensions.get(dim)
            row += [_num(d.baseline) if d else "-", _signed(d.delta) if d else "-"]
        dim_rows.append(row)
    header = ["Dimension", "Mean", "95% CI", "Trials"]
    if comparison is not None:
        header += ["Baseline", "Δ"]
    lines += [*_table(header, dim_rows), ""]

    if comparison is not None:
        for heading, changes in [
            ("Regressions", comparison.regressions),
            ("Drops that are not significant", comparison.drops),
            ("Improvements", comparison.improvements),
        ]:
            lines += [f"## {heading}", ""]
            lines += [*_changes_table(changes), ""] if changes else ["None.", ""]

    lines += ["## Scenarios", ""]
    dims = list(run.dimensions)
    deltas = {d.scenario_id: d for d in comparison.scenarios} if comparison else {}
    order = [d.scenario_id for d in comparison.scenarios] if comparison else []
    scenarios = sorted(
        run.scenarios,
        key=lambda s: (order.index(s.scenario_id) if s.scenario_id in order else len(order),),
    )
    rows = []
    for s in scenarios:
        row = [
            s.scenario_id + (" (critical)" if s.critical else ""),
            s.status,
            f"{s.passed}/{s.evaluable}" + (f" (+{s.errored} errored)" if s.errored else ""),
            _pct_ci(s.pass_rate, s.pass_rate_ci),
            *(_num(s.mean_score(d)) for d in dims),
            ", ".join(f"{k} {v}" for k, v in sorted(s.severities.items())) or "-",
            next(iter(s.failure_reasons), ""),
        ]
        if comparison is not None:
            delta = deltas.get(s.scenario_id)
            row += [
                delta.status if delta else "-",
                _signed(delta.pass_rate.delta, pct=True) if delta else "-",
            ]
        rows.append(row)
    header = ["Scenario", "Status", "Passed", "Pass rate (95% CI)", *dims, "Severity filed"]
    header.append("Main failure")
    if comparison is not None:
        header += ["Change", "Δ pass rate"]
    lines += [*_table(header, rows), ""]
    return "\n".join(lines)


def write_reports(
    run: RunSummary,
    comparison: Comparison | None = None,
    *,
    json_path: str | Path | None = None,
    markdown_path: str | Path | None = None,
    own_words: Mapping[str, OwnWordsFigures] | None = None,
) -> None:
    """Write the JSON and/or Markdown report (what `run_evals --json/--markdown` need).
    `own_words`: per prompt profile, how much of the filed reports is the model's own and how
    much of that holds (issue 40; `evals.selectors.own_shares`)."""
    shares = dict(own_words or {})
    if json_path is not None:
        data = json_report(run, comparison)
        data["summary"]["own_words"] = {
            profile: {
                "share": _r(figures.mean),
                "reports": figures.reports,
                "held": None if figures.held is None else _r(figures.held),
                "unchecked": None if figures.unchecked is None else _r(figures.unchecked),
                "reports_with_own_words": figures.with_own,
                # Each stored report's own share, and of it what holds (issue 40).
                "per_report": [
                    {
                        "scenario": scenario,
                        "trial": trial,
                        "share": _r(share),
                        "held": None if own_held is None else _r(own_held),
                        "unchecked": None if unchecked is None else _r(unchecked),
                    }
                    for scenario, trial, share, own_held, unchecked in figures.per_report
                ],
            }
            for profile, figures in shares.items()
        }
        Path(json_path).write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    if markdown_path is not None:
        text = markdown_report(run, comparison)
        said = [f"- {own_words_line(profile, figures)}" for profile, figures in shares.items()]
        Path(markdown_path).write_text(text + ("\n" + "\n".join(said) + "\n" if said else ""))


class OwnWordsFigures(Protocol):
    """One profile's own-words figures (`evals.selectors.OwnShare` has them)."""

    @property
    def mean(self) -> float: ...
    @property
    def reports(self) -> int: ...
    @property
    def held(self) -> float | None: ...
    @property
    def unchecked(self) -> float | None: ...
    @property
    def with_own(self) -> int: ...
    @property
    def per_report(self) -> tuple[tuple[str, int, float, float | None, float | None], ...]: ...


def own_words_line(profile: str, figures: OwnWordsFigures) -> str:
    """One sentence for a profile: its own share, and how much of it holds."""
    line = (
        f"The model's own words ({profile} profile): {_pct(figures.mean)} of the reports' text "
        f"(findings and summary), over {figures.reports} filed report(s)"
    )
    if figures.held is None or figures.unchecked is None:
        return line + "; none wrote anything of its own"
    wrong = max(0.0, 1 - figures.held - figures.unchecked)
    return (
        f"{line}; of the own words in {figures.with_own} report(s), {_pct(figures.held)} hold "
        f"(found in the data), {_pct(figures.unchecked)} not checked, {_pct(wrong)} wrong or "
        "not in the data"
    )
