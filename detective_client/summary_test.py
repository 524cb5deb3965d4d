"""The Markdown summary: read in ten seconds, and a model's words kept as text."""

from __future__ import annotations

from detective_client.summary import MOST_FINDINGS, markdown, text
from detective_client.verdict import AT_OR_ABOVE, BELOW, NO_VERDICT, WAITS_FOR_PERSON

SUSPECT = (
    "test_{0} fails; first suspect: 867e907b4 'Round {0} up' changed catalog/{0}.py, which "
    "tests/test_{0}.py exercises: its change is in `{0}_of`, which test_{0} calls; the test is "
    "named after it (Ada Lovelace)"
)
NAMES = ("price", "stock", "tax")


def failing() -> dict[str, object]:
    ids = ", ".join(f"tests.test_{name}::test_{name}" for name in NAMES)
    return {
        "version": "1.2.0",
        "state": "assessed",
        "severity": "medium",
        "why": "Medium from failed tests (3).",
        "findings": [
            {"text": f"3 failed tests: {ids}", "evidence": ["3 = failed tests (its own sentence)"]},
            {"text": "All 3 failing tests failed for the first time. They passed before."},
            {"text": "tests.test_tax::test_tax fails beside changed code: catalog/tax.py"},
            {"text": "; ".join(SUSPECT.format(name) for name in NAMES), "from_policy": True},
        ],
        "suspects": [SUSPECT.format(name) for name in NAMES],
        "url": "https://detective.example/services/catalog/releases/1.2.0/",
        "review_url": "https://detective.example/review/#queue-item-7",
    }


def test_each_failing_test_is_named_once_with_its_first_suspect() -> None:
    summary = markdown(failing(), "catalog", AT_OR_ABOVE, "medium")
    for name in NAMES:
        assert summary.count(f"test_{name}") == 1, summary
        assert f"- `test_{name}`: `867e907b4` Round {name} up (`catalog/{name}.py`)" in summary
    assert "its own sentence" not in summary and "evidence" not in summary
    # Only the first sentence of a finding: the page has the rest.
    assert "All 3 failing tests failed for the first time.\n" in summary
    assert "They passed before" not in summary
    assert "**Why:** Medium from failed tests (3)." in summary
    assert summary.startswith("### ⛔ Detective: catalog 1.2.0: Medium risk · at or above the bar")


def test_a_waiting_report_links_its_review_item() -> None:
    verdict = {**failing(), "state": "needs_person"}
    summary = markdown(verdict, "catalog", WAITS_FOR_PERSON, "high")
    assert "decide on the [review page](https://detective.example/review/#queue-item-7)" in summary
    assert "[Review item](https://detective.example/review/#queue-item-7)" in summary
    assert "[Release page](https://detective.example/services/catalog/releases/1.2.0/)" in summary
    # An assessed report is not on the desk: no review link.
    assert "Review item" not in markdown(failing(), "catalog", AT_OR_ABOVE, "high")


def test_at_most_five_findings_and_the_rest_counted() -> None:
    verdict = {
        "version": "3.0.0",
        "state": "assessed",
        "severity": "low",
        "findings": [{"text": f"Finding number {n}"} for n in range(8)],
    }
    summary = markdown(verdict, "shop", BELOW, "high")
    numbered = [line for line in summary.splitlines() if line[:1].isdigit() and ". " in line]
    assert len(numbered) == MOST_FINDINGS
    assert "3 more on the release page." in summary
    assert "**What to do:** nothing: the release passes the gate." in summary


def test_code_spans_render_and_everything_else_stays_text() -> None:
    assert text("its change is in `discount_of` <b>") == r"its change is in `discount_of` \<b\>"
    assert text("an odd ` backtick") == r"an odd \` backtick"
    verdict = {
        "version": "2.0.0",
        "state": "assessed",
        "severity": "low",
        "why": "All fine.\n\n## Approved <img src=x onerror=alert(1)>",
        "findings": [{"text": "See [the fix](https://evil.example) | col"}],
    }
    summary = markdown(verdict, "shop", BELOW, "high")
    assert r"See \[the fix\](https://evil.example) \| col" in summary
    assert r"\<img src=x onerror=alert(1)\>" in summary
    assert "\n## Approved" not in summary and r"\#\# Approved" in summary


def test_no_verdict_says_why_and_what_to_do() -> None:
    verdict = {
        "version": "9.9.9",
        "state": "unavailable",
        "severity": None,
        "problem": "Detective did not answer.",
        "next_step": "Check `DETECTIVE_URL`, then re-run this job.",
    }
    summary = markdown(verdict, "shop", NO_VERDICT, "high")
    assert summary.startswith("### ❔ Detective: shop 9.9.9: No verdict · no verdict (exit 3)")
    assert "**Why:** Detective did not answer." in summary
    assert "**What to do:** Check `DETECTIVE_URL`, then re-run this job." in summary


def test_a_finding_the_policy_added_is_marked_unless_the_policy_is_the_verdict() -> None:
    verdict = {
        "version": "2.0.0",
        "state": "assessed",
        "severity": "high",
        "findings": [{"text": "Error rate 9 %"}, {"text": "12 failed tests", "from_policy": True}],
    }
    lines = markdown(verdict, "shop", AT_OR_ABOVE, "high").splitlines()
    assert "1. Error rate 9 %" in lines and "2. 12 failed tests *(the policy's)*" in lines
    policy = {**verdict, "source": "policy"}
    lines = markdown(policy, "shop", AT_OR_ABOVE, "high").splitlines()
    assert "2. 12 failed tests" in lines
    assert "the policy's verdict (no model assessment)" in lines[0]


def test_a_new_error_group_keeps_its_route_counts_and_first_suspect_whole() -> None:
    finding = (
        "ZeroDivisionError in shop/pricing.py `line_total`: 10 of 60 requests of "
        "POST /api/v2/carts/{cart_id}/lines/{line_id}/total since 1.1.0 (none before); new in "
        "this release; first suspect a1b2c3d 'Round prices per line so that cart totals match "
        "the printed invoice' (Ana Lima), whose change is on that line. More detail follows."
    )
    verdict = {**failing(), "findings": [{"text": finding}], "suspects": []}
    summary = markdown(verdict, "shop", AT_OR_ABOVE, "medium")
    assert (
        "'Round prices per line so that cart totals match the printed invoice' (Ana Lima), "
        "whose change is on that line." in summary
    ), summary
    assert "More detail" not in summary  # still its first sentence alone
    # A finding without a suspect is cut at 30 words, as before.
    long = {**verdict, "findings": [{"text": " ".join(["word"] * 40)}]}
    assert "word …" in markdown(long, "shop", AT_OR_ABOVE, "medium")
