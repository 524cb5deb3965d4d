from __future__ import annotations

import pytest

from risk.empty_findings import sort_findings

KEYS = {"E1": "12 tests failed.", "E2": "The error rate is 9 %."}


@pytest.mark.parametrize(
    ("findings", "kept", "problem"),
    [
        (["E1", "Payment tests fail."], ["Payment tests fail."], "finding 1 is only an evidence"),
        (["[E2]."], [], "finding 1 is only an evidence key"),
        (
            ["E1, E2 and E3"],
            [],
            "finding 1 cites evidence keys the release's summary never "
            "showed (E3); it showed E1, E2",
        ),
        (["ok", "  "], ["ok"], "finding 2 is empty"),
        (["Tests fail.", "tests  fail"], ["Tests fail."], "finding 2 repeats finding 1"),
    ],
)
def test_findings_without_content_of_their_own_are_named(
    findings: list[str], kept: list[str], problem: str
) -> None:
    result = sort_findings(findings, KEYS)
    assert result.kept == kept
    assert any(problem in p for p in result.problems), result.problems


def test_eighteen_unknown_keys_are_one_problem_naming_each_once() -> None:
    result = sort_findings([f"E{n}" for n in range(1, 19)] + ["E3"], {"E1": "x"})
    assert len(result.problems) == 2  # the unknown keys; E1 alone
    assert result.unknown_keys == [f"E{n}" for n in range(2, 19)]
    assert result.problems[0].startswith("findings 2, 3,")


@pytest.mark.parametrize(
    "finding",
    ["E1 shows 12 failed tests", "Release E2E tests fail", "Error rate E-3", "HTTP 500s in E2E"],
)
def test_a_finding_with_words_of_its_own_is_kept(finding: str) -> None:
    result = sort_findings([finding], KEYS)
    assert (result.kept, result.problems) == ([finding], [])
