"""The policy's verdict on a stored release, with its history: what every report, the agent's
summary, the release page and the backtest read (`judge_release`).

The policy and its plain-data verdict are releases' (`releases.verdicts`); the history it
weighs (earlier releases' tests, commits and metric samples) is read from this app's tables
(`sources.history.read_history`), which is why the judging of a release lives here.
"""

from __future__ import annotations

from dataclasses import replace

from releases.models import Release
from releases.release_order import earlier_releases
from releases.verdicts import Judged, p95_of, policy_in_force, previous_p95, settings_of
from risk.history import ReleaseRef
from risk.policy import evaluate
from risk.run_counts import ran_count
from risk.signal import PolicyVerdict, severity_of
from sources.earlier_commits import EarlierCommits
from sources.history import read_history
from sources.judging_hooks import extra_signals


def judge_release(release: Release, *, carried: EarlierCommits | None = None) -> Judged:
    """The policy's verdict on a release with its history: the policy, the earlier releases
    (with the previous p95 among them) and the history's few queries (sources/history.py),
    each read once (the policy with the release when it was read so:
    `verdicts.with_policy_in_force`). `carried`: the earlier releases' commits, for a caller
    that judges a service's releases in order (`sources.earlier_commits`); the verdict is the
    same."""
    policy = policy_in_force(release)
    settings = settings_of(policy)
    window = settings.history_releases
    wanted = max(window, 1)
    rows = list(
        earlier_releases(release).values_list(
            "id", "version", "order_at", "deployment_metrics", "test_results"
        )[:wanted]
    )
    measured = [metrics for *_, metrics, _tests in rows if metrics is not None]
    if measured:
        previous = p95_of(measured[0])
    elif len(rows) < wanted:
        previous = None  # every earlier release was read: none was measured
    else:
        previous = previous_p95(release)
    refs = [ReleaseRef(id=pk, version=version, at=at) for pk, version, at, *_ in rows[:window]]
    past = read_history(release, window=window, refs=refs, settings=settings, carried=carried)
    # What "the usual number of tests" is judged against (risk/run_counts.py): read with the
    # earlier releases above, no query of its own.
    counts = tuple(
        (version, ran)
        for _pk, version, _at, _metrics, tests in rows[:window]
        if isinstance(tests, dict) and (ran := ran_count(tests))
    )
    if counts:
        past = replace(past, earlier_test_counts=counts)
    summary = release.as_summary()
    verdict = evaluate(summary, settings, previous_p95=previous, history=past)
    if extra := extra_signals(release, settings, past):
        signals = (*verdict.signals, *extra)
        verdict = PolicyVerdict(severity=severity_of(signals), signals=signals)
    return Judged(policy, settings, verdict, summary, past)
