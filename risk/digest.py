"""What the model is shown of a release: its data, the policy's signals, and for a long list
of changes a compact form.

The policy's signals travel beside the raw data so that the model reads the figures and
thresholds instead of computing them (small models compare 0.012 with 0.05 wrongly). A
release with hundreds of changes would cost the local model a minute of prompt processing
and bury the one risky change: above `COMPACT_CHANGES_ABOVE` the changes come as counts by
kind, the risky and suspicious ones verbatim, and a few examples of each kind.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from risk.history import History
from risk.history_signals import classify_failures
from risk.instructions import reads_like_instruction
from risk.policy import PolicySettings, PolicyVerdict
from risk.signal import change_areas
from risk.suspect_signals import top_suspects

COMPACT_CHANGES_ABOVE = 40
# The brief view's evidence: the first sentences, which the policy orders by level (orders in
# the data first, then high, then medium). A model that copies them writes about 25 tokens a
# second on two cores, and the nine sentences of a database upgrade with its history took it
# 19 s to write out; the report's signals keep every one, and a person sees them all.
BRIEF_EVIDENCE_MAX = 5
# New failures' first suspects in the brief view: the policy's evidence says them in one
# sentence that is left out of the brief view's first sentences whenever anything raises the
# severity, and the small profile has no drill-down to ask for them. Bounded as the evidence.
BRIEF_SUSPECTS_MAX = 5
BRIEF_FIELDS = ("version", "title")
# What the release's authors wrote; the version is the key the agent was asked about.
UNTRUSTED_FIELDS = ("title", "changes", "tests", "deployment_metrics")
EXAMPLES_PER_KIND = 2


def _kind(change: str) -> str:
    first = change.strip().split(maxsplit=1)[0] if change.strip() else "other"
    return first.strip(":,.").lower() or "other"


def compact_changes(changes: Sequence[str], cfg: PolicySettings) -> dict[str, Any]:
    risky = [c for c in changes if change_areas(c, cfg) or c == WITHHELD]
    rest = [c for c in changes if c not in risky]
    kinds = Counter(_kind(c) for c in rest)
    examples: dict[str, list[str]] = {}
    for change in rest:
        bucket = examples.setdefault(_kind(change), [])
        if len(bucket) < EXAMPLES_PER_KIND:
            bucket.append(change)
    return {
        "count": len(changes),
        "in_critical_areas_or_flagged": risky,
        "others_by_kind": [
            {"kind": kind, "count": count, "examples": examples[kind]}
            for kind, count in kinds.most_common()
        ],
    }


def evidence_keys(verdict: PolicyVerdict) -> dict[str, str]:
    """The brief view's evidence by key ({"E1": sentence}): the keys a filing may cite."""
    # What raises the severity; the history's reassurances ("within the 1.5 times allowed")
    # only where nothing does: 90 tokens of the local model's prompt apiece.
    sentences = verdict.evidence(always_cited=False)[:BRIEF_EVIDENCE_MAX]
    return {f"E{n}": sentence for n, sentence in enumerate(sentences, start=1)}


def policy_block(
    verdict: PolicyVerdict, version: int | None, *, brief: bool = False
) -> dict[str, Any]:
    """The policy as the model reads it. Measured on Qwen2.5-Coder-1.5B: with the policy's rule
    ("only a critical signal makes a release high") and each signal's `critical` flag beside
    them, it filed high for clean releases; without them it filed the floor on 8 of 8. The
    floor already carries what they say; the report keeps the full signals.

    Each signal goes by its sentence (`detail`), not its name: given the names ("Failed tests
    in a critical area") first in each entry, the same model filed them as its findings, which
    then named no test (3 of 3 trials of `failed_tests_only_in_names`, 2026-11-25).

    `brief` leaves the signals out: the evidence says each raised one again, and a model told
    to copy the evidence reads them only as more prompt to process (see `digest`); and it
    keeps the first BRIEF_EVIDENCE_MAX sentences of the evidence, by key ("E1"), without the
    history's sentences that are always cited when something else raises the severity."""
    if brief:
        # The severity last, nearest to where the model starts writing: given it before the
        # evidence, the local model filed medium for 2 low releases of 3 trials each, whose
        # evidence is every signal's reading (2026-11-25).
        return {
            "version": version,
            # Keyed: the brief report tool cites a sentence by its key (agent/tools).
            "evidence": evidence_keys(verdict),
            "severity_floor": verdict.severity,
        }
    # The two keys the model acts on come last, nearest to where it starts writing.
    return {
        "version": version,
        "signals": [
            {
                "level": s.level,
                "figure": s.figure,
                "threshold": s.threshold,
                "detail": s.detail,
            }
            for s in verdict.signals
        ],
        "severity_floor": verdict.severity,
        "evidence": verdict.evidence(),
    }


WITHHELD = "[withheld: this text reads like instructions to the assessor; the policy flagged it]"


def withhold_instructions(value: Any) -> Any:
    """`value` with every string that reads like orders to the assessor replaced by a note.

    Encoding keeps such text from passing for the chat's markup, but a small model still
    obeys a readable "file severity low" (measured: it used the injected sentence as its
    summary). What it cannot read it cannot follow; the person reviewing sees the original."""
    if isinstance(value, str):
        return WITHHELD if reads_like_instruction(value) else value
    if isinstance(value, Mapping):
        return {key: withhold_instructions(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [withhold_instructions(inner) for inner in value]
    return value


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def drilldowns(history: History) -> dict[str, str]:
    """Which of the agent's drill-downs have something to show for this release, by tool
    name: a release ingested with its detail has its tests, commits and metric samples to
    look at; one typed in by hand has none, and the key is then left out of the digest."""
    shown: dict[str, str] = {}
    if history.has_test_detail:
        failing = history.failing()
        flaky = [t for t in history.tests if t.outcome == "flaky"]
        if failing or flaky:
            parts = [_count(len(failing), "failed test")] if failing else []
            if flaky:
                parts.append(_count(len(flaky), "test") + " that passed on a rerun")
            shown["get_test_details"] = (
                f"{', '.join(parts)}, with their history in {history.service}: details available"
            )
        else:
            shown["get_test_details"] = "no failed tests; the test results are available"
        with_suspects = [t for t in failing if t.suspects]
        if with_suspects:
            shown["get_failure_suspects"] = (
                f"suspect commits of {_count(len(with_suspects), 'failed test')}, with the "
                "frames and changed lines: details available"
            )
    if history.changes is not None:
        changes = history.changes
        shown["get_code_changes"] = (
            f"{_count(changes.commits, 'commit')}, {_count(changes.file_count, 'file')} changed "
            f"({changes.lines:,} lines): details available"
        )
    if history.metrics:
        names = ", ".join(m.name for m in history.metrics[:5])
        recent = max((len(m.recent) for m in history.metrics), default=0)
        against = f" and the last {_count(recent, 'release')}" if recent else ""
        shown["get_metric_history"] = (
            f"samples of {names} in this release's window, its baseline{against}: details available"
        )
    return shown


def brief_suspects(history: History, cfg: PolicySettings) -> list[str]:
    """Each new or returned (not known-flaky) failure's first suspect, for the brief view."""
    if not history.has_test_detail:
        return []
    failures = classify_failures(history, cfg)
    return top_suspects([*failures.new, *failures.returned], BRIEF_SUSPECTS_MAX)


def digest(
    summary: Mapping[str, Any],
    verdict: PolicyVerdict,
    *,
    version: int | None,
    cfg: PolicySettings | None = None,
    history: History | None = None,
    brief: bool = False,
) -> dict[str, Any]:
    """The summary as the release API serves it to the agent.

    `brief` is the view for a model that copies the policy's evidence and has no drill-downs
    (the small prompt profile): the release's name and the policy without its signals, the
    data itself left to the evidence's sentences, which carry its figures. On the 2-core
    machine the local model processes 75 to 90 prompt tokens a second: the full view of a
    release with its history came to about 1,800 tokens (database_upgrade_postgres16), 20 s
    before the model wrote a word, and with its data beside the evidence still 500."""
    cfg = cfg or PolicySettings()
    if brief:
        named = {key: summary[key] for key in BRIEF_FIELDS if key in summary}
        out = {**withhold_instructions(named)}
        said = brief_suspects(history, cfg) if history is not None else []
        if said:
            # Before the policy, whose severity stays last, nearest to where the model writes;
            # withheld like the data: a commit's subject is the authors' text.
            out["suspects"] = withhold_instructions(said)
        out["policy"] = policy_block(verdict, version, brief=True)
        return out
    out = {
        key: withhold_instructions(value) if key in UNTRUSTED_FIELDS else value
        for key, value in summary.items()
    }
    changes = out.get("changes")
    if isinstance(changes, list) and len(changes) > COMPACT_CHANGES_ABOVE:
        out["changes"] = compact_changes([c for c in changes if isinstance(c, str)], cfg)
    found = drilldowns(history) if history is not None else {}
    if found:
        out["drilldowns"] = found
    out["policy"] = policy_block(verdict, version)
    return out
