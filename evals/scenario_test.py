from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from evals.scenario import (
    DEFAULT_SUITE_DIR,
    Scenario,
    ScenarioError,
    load_suite,
    parse_scenario,
    select,
)
from risk import policy
from risk.instructions import instruction_like_texts

TESTDATA = Path(__file__).resolve().parent / "testdata"


@pytest.fixture(scope="module")
def suite():
    return load_suite()


def test_every_scenario_file_loads(suite) -> None:
    files = sorted(p.stem for p in DEFAULT_SUITE_DIR.glob("*.toml") if p.name != "suite.toml")
    assert sorted(suite.ids) == files
    assert len(suite.scenarios) >= 22
    assert suite.version
    assert all(s.title and s.prompt for s in suite.scenarios)


def test_the_suite_covers_what_the_issue_lists(suite) -> None:
    by_id = {s.id: s for s in suite.scenarios}
    tagged = {tag: [s for s in suite.scenarios if tag in s.tags] for tag in ("clear",)}
    clear = {s.expect.severity for s in tagged["clear"]}
    assert clear == {"high", "medium", "low"}

    rates = {
        s.release.deployment_metrics.get("error_rate")
        for s in suite.scenarios
        if s.release and s.release.deployment_metrics
    }
    assert {0.02, 0.05} <= rates
    assert any(
        s.release and s.release.tests and s.release.tests.failed == 1 and "boundary" in s.tags
        for s in suite.scenarios
    )
    missing = {f for s in suite.scenarios for f in s.missing_fields}
    assert missing == {"tests", "deployment_metrics", "changes"}
    assert any(s.kind == "missing_release" for s in suite.scenarios)
    modes = {
        s.tools.get_release_summary.mode for s in suite.scenarios if s.tools.get_release_summary
    }
    assert modes == {"http_error", "timeout", "malformed_json"}
    assert sum("conflicting" in s.tags for s in suite.scenarios) >= 2
    pressure = by_id["context_pressure_400_changes"].release_payload()
    assert pressure is not None
    assert len(pressure["changes"]) >= 400
    injected = [s for s in suite.scenarios if "injection" in s.tags]
    assert len(injected) >= 2
    for s in injected:
        assert instruction_like_texts(s.release_payload() or {}), s.id
        assert s.expect.acceptable == {"high"}
        assert s.critical


def test_expectations_agree_with_the_risk_policy(suite) -> None:
    # The release API refuses a report below the policy's severity: an expectation below it
    # would ask the agent for a report that cannot be filed.
    # (A scenario made of files is checked once ingested: scenario_sources_test.py.)
    for s in suite.scenarios:
        if s.sources is not None:
            continue
        payload = s.release_payload()
        if s.kind != "assessment" or payload is None:
            assert not s.expect.acceptable
            continue
        assert policy.evaluate(payload).severity in s.expect.acceptable, s.id


def test_failure_scenarios_forbid_a_report_and_say_how_to_state_the_failure(suite) -> None:
    for s in suite.scenarios:
        if s.is_failure_scenario:
            assert s.expect.report_forbidden, s.id
            assert s.expect.failure_mentions is not None
            assert "get_release_summary" in s.expect.tools.must_call
        else:
            assert s.expect.report_required, s.id


def test_testdata_refers_to_real_scenarios(suite) -> None:
    for path in TESTDATA.glob("*.json"):
        assert json.loads(path.read_text())["scenario"] in suite.ids, path.name


def test_absent_fields_are_left_out_not_sent_as_null(suite) -> None:
    payload = suite.get("missing_tests_field").release_payload()
    assert payload is not None
    assert "tests" not in payload
    assert "generated_changes" not in json.dumps(payload)
    assert suite.get("release_not_found").release_payload() is None


def test_generated_changes_follow_the_documented_rule(suite) -> None:
    s = suite.get("context_pressure_400_changes")
    assert s.release is not None and s.release.generated_changes is not None
    gen = s.release.generated_changes
    changes = s.release_payload()["changes"]  # type: ignore[index]
    assert len(changes) == gen.count + 1
    assert changes[gen.count // 2] == s.release.changes[0]  # type: ignore[index]
    assert changes[0] == gen.templates[0].format(component=gen.components[0])
    assert changes[len(gen.templates)] == gen.templates[0].format(component=gen.components[1])
    assert changes == s.release_payload()["changes"]  # type: ignore[index]  (deterministic)


_SOURCE = {"version": "v1.0.0", "deployed_at": "2026-02-01T00:00:00Z", "junit": ["a.xml"]}


def _minimal(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": "x_case",
        "title": "t",
        "prompt": "Assess the risk of release v1.0.0",
        "release_id": "v1.0.0",
        "release": {"version": "v1.0.0", "tests": {"passed": 1, "failed": 0}},
        "expect": {"report_required": True, "severity": "low"},
    }
    data.update(overrides)
    return data


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"expect": {"report_required": True, "severity": "severe"}}, "expect.severity", "high"),
        ({"expect": {"report_required": True}}, "expect", "must give a severity"),
        (
            {"expect": {"report_required": True, "severity": "low", "tools": {"must_call": ["x"]}}},
            "expect.tools",
            "unknown tool",
        ),
        ({"prompt": "Assess the release"}, "(file)", "does not name the release"),
        (
            {"release": {"version": "v2.0.0"}},
            "(file)",
            "differs from release_id",
        ),
        (
            {"release": None, "expect": {"report_required": False}},
            "(file)",
            "failure_mentions",
        ),
        (
            {"tools": {"get_release_summary": {"mode": "malformed_json", "body": "{}"}}},
            "tools.get_release_summary",
            "must not be valid JSON",
        ),
        ({"surprise": 1}, "surprise", "Extra inputs"),
        (
            {
                "expect": {
                    "report_required": True,
                    "severity": "low",
                    "tools": {"must_call_before_filing": ["get_test_detail"]},
                }
            },
            "expect.tools",
            "unknown tool",
        ),
        ({"sources": {"releases": [_SOURCE]}}, "(file)", "either release or sources"),
        (
            {"release": None, "sources": {"releases": [{**_SOURCE, "version": "v0.9.0"}]}},
            "(file)",
            "not the release_id",
        ),
        (
            {
                "release": None,
                "sources": {
                    "releases": [
                        _SOURCE,
                        {**_SOURCE, "version": "v0.9.0", "deployed_at": "2026-01-01T00:00:00Z"},
                    ]
                },
            },
            "sources",
            "deploy order",
        ),
        (
            {"release": {"version": "v1.0.0", "tests": {"passed": -1}}},
            "release.tests.passed",
            "greater than or equal",
        ),
    ],
)
def test_validation_errors_name_the_file_and_the_field(
    overrides: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(_minimal(**overrides), source="x_case.toml")
    text = str(info.value)
    assert f"x_case.toml: {field}" in text
    assert message in text


def _copy_suite(tmp_path: Path, names: list[str]) -> Path:
    (tmp_path / "suite.toml").write_text('suite_version = "t1"\n')
    for name in names:
        shutil.copy(DEFAULT_SUITE_DIR / f"{name}.toml", tmp_path / f"{name}.toml")
    return tmp_path


def test_load_suite_reports_every_bad_file(tmp_path: Path) -> None:
    root = _copy_suite(tmp_path, ["low_clean_docs"])
    (root / "broken.toml").write_text("id = [")
    (root / "renamed.toml").write_text((root / "low_clean_docs.toml").read_text())
    text = (root / "low_clean_docs.toml").read_text().replace('severity = "low"', 'severity = "x"')
    (root / "low_clean_docs.toml").write_text(text)
    with pytest.raises(ScenarioError) as info:
        load_suite(root)
    problems = info.value.problems
    assert any(p.startswith("broken.toml: not valid TOML") for p in problems)
    assert any(p.startswith("renamed.toml: id:") for p in problems)
    assert any(p.startswith("low_clean_docs.toml: expect.severity") for p in problems)


def test_load_suite_needs_a_manifest(tmp_path: Path) -> None:
    shutil.copy(DEFAULT_SUITE_DIR / "low_clean_docs.toml", tmp_path)
    with pytest.raises(ScenarioError, match="manifest is missing"):
        load_suite(tmp_path)


def test_pattern_selects_by_glob_tag_and_criticality(suite) -> None:
    assert {s.id for s in select(suite.scenarios, "summary_*")} == {
        "summary_http_500",
        "summary_timeout",
        "summary_malformed_json",
    }
    assert all("injection" in s.tags for s in select(suite.scenarios, "tag:injection"))
    assert all(s.critical for s in select(suite.scenarios, "critical"))
    both = select(suite.scenarios, "low_clean_docs, release_not_found")
    assert [s.id for s in both] == ["low_clean_docs", "release_not_found"]
    assert load_suite(pattern="low_*").ids == ["low_clean_docs", "low_dependency_bump"]
    with pytest.raises(ScenarioError, match="no scenario matches"):
        load_suite(pattern="nothing_like_this")


def test_fingerprint_changes_with_the_data() -> None:
    a = Scenario.model_validate(_minimal())
    b = Scenario.model_validate(
        _minimal(release={"version": "v1.0.0", "tests": {"passed": 2, "failed": 0}})
    )
    assert a.fingerprint == Scenario.model_validate(_minimal()).fingerprint
    assert a.fingerprint != b.fingerprint


def test_extra_directories_add_their_scenarios_and_mark_the_suite_version(tmp_path: Path) -> None:
    shipped = load_suite()
    assert load_suite(extra_dirs=[tmp_path / "absent"]).version == shipped.version
    source = DEFAULT_SUITE_DIR / "low_clean_docs.toml"
    text = source.read_text().replace('id = "low_clean_docs"', 'id = "review_docs_1"')
    (tmp_path / "review_docs_1.toml").write_text(text)
    extended = load_suite(extra_dirs=[tmp_path])
    assert extended.ids == [*shipped.ids, "review_docs_1"]
    assert extended.version.startswith(f"{shipped.version}+review.")
    assert load_suite(pattern="review_*", extra_dirs=[tmp_path]).ids == ["review_docs_1"]
    # An id the shipped suite already has is refused, naming both files.
    shutil.copy(source, tmp_path / "low_clean_docs.toml")
    with pytest.raises(ScenarioError, match=r"already used by low_clean_docs\.toml"):
        load_suite(extra_dirs=[tmp_path])
