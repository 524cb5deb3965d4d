from __future__ import annotations

import tomllib
from dataclasses import replace

import pytest

from review.scenario import Label, ScenarioRejected, scenario, scenario_data, scenario_id, to_toml

LABEL = Label(
    decision_id=7,
    version="v2.1.0-RC.1",
    title="Payments",
    changes=["Rewrite the refund flow", 'Quote " and back\\slash\nnew line \x7f ünïcode'],
    test_results={"passed": 120, "failed": 1, "skipped": 0, "failing_tests": ["test_refund"]},
    deployment_metrics={"error_rate": 0.031, "response_time_p95": 480, "cpu": None},
    decided_severity="high",
    model_severity="medium",
    policy_severity="medium",
    overridden=True,
    reason="Refunds are money: one failing refund test is high for us.",
    wrong_finding="",
    reviewer="rm",
)


def test_the_toml_reads_back_as_the_same_valid_scenario() -> None:
    text = to_toml(scenario_data(LABEL))
    loaded = scenario(LABEL)
    assert tomllib.loads(text) == scenario_data(LABEL)
    assert loaded.id == "review_v2_1_0_rc_1_7" == scenario_id(LABEL)
    assert loaded.expect.severity == "high"
    assert "from-review" in loaded.tags and "override" in loaded.tags
    assert "Refunds are money" in loaded.description
    assert "the model filed medium" in loaded.description
    payload = loaded.release_payload()
    assert payload is not None
    assert payload["changes"][1] == LABEL.changes[1]  # type: ignore[index]
    # A metric that was not measured cannot be written as null in TOML: it is left out.
    assert payload["deployment_metrics"] == {"error_rate": 0.031, "response_time_p95": 480}


def test_missing_data_stays_missing_and_a_wrong_finding_becomes_a_forbidden_claim() -> None:
    label = replace(
        LABEL, test_results=None, overridden=False, reason="", wrong_finding="2 payment tests fail"
    )
    loaded = scenario(label)
    assert loaded.missing_fields == ["tests"]
    assert [group.any_of for group in loaded.expect.forbidden_claims] == [["2 payment tests fail"]]
    assert "wrong-finding" in loaded.tags and "accepted" in loaded.tags
    assert tomllib.loads(to_toml(scenario_data(label)))["expect"]["forbidden_claims"][0][
        "any_of"
    ] == ["2 payment tests fail"]


def test_a_label_the_loader_rejects_is_not_written() -> None:
    with pytest.raises(ScenarioRejected, match="severity"):
        scenario(replace(LABEL, decided_severity="urgent"))
