"""The severity that counts for a report: one rule, in two forms.

- `severity_that_counts(...)`: the rule as a plain function, for one report in hand;
- `severity_that_counts_expression(...)`: the same rule as a database expression, for lists,
  filters, sorts and counts over many reports or releases.

The rule: a person's decision, when there is one; else, while the report waits for review,
the higher of the model's and the policy's severity (a report below the policy never shows
lower than what the data says until someone looks); else the severity the model filed.

`severity_test.py` checks that both forms agree on every combination.
"""

from __future__ import annotations

from django.db.models import Case, CharField, F, Q, Value, When

SEVERITY_RANK: dict[str, int] = {"low": 1, "medium": 2, "high": 3}


def higher(first: str | None, second: str | None) -> str | None:
    """The higher of two severities; an empty or unknown one does not count."""
    known = [s for s in (first, second) if s in SEVERITY_RANK]
    return max(known, key=SEVERITY_RANK.__getitem__) if known else None


def severity_that_counts(
    *,
    filed: str | None,
    policy: str | None,
    needs_review: bool,
    decided: str | None,
) -> str | None:
    """The severity a report counts as (None: there is no report)."""
    if decided:
        return decided
    if not filed:
        return None
    if needs_review:
        return higher(filed, policy)
    return filed


def severity_that_counts_expression(
    *,
    filed: str,
    policy: str,
    needs_review: str,
    decided: str,
) -> Case:
    """The rule over the named fields or annotations (each a lookup path)."""

    def either(severity: str) -> Q:
        return Q(**{filed: severity}) | Q(**{policy: severity})

    waiting = Q(**{needs_review: True})
    return Case(
        When(Q(**{f"{decided}__isnull": False}) & ~Q(**{decided: ""}), then=F(decided)),
        When(Q(**{f"{filed}__isnull": True}), then=Value(None)),
        When(waiting & either("high"), then=Value("high")),
        When(waiting & either("medium"), then=Value("medium")),
        default=F(filed),
        output_field=CharField(),
    )
