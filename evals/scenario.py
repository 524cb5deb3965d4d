"""Evaluation scenarios: the data files under `evals/scenarios/`, loaded and validated.

A suite is a directory holding a manifest `suite.toml` (the `suite_version`, bumped whenever a
scenario's data or expectations change, so that two runs are only compared like for like) and
one TOML file per scenario, named after its id. The file format, field by field, is the
`Scenario` model below; `evals/scenarios/README.md` shows a whole file.

Rules the loader applies (so that the data files stay short and readable):

- `release` absent means the release does not exist: the site's API answers 404 for it.
- Any field of `release` may be absent; an absent field is *not sent* to the agent (it is
  not sent as null), which is how the missing-data scenarios are written.
- `release.generated_changes` expands into many low-impact changes for context-pressure
  scenarios. Change i (counting from 0) is `templates[i % T].format(component=C)` where
  `C = components[(i // T) % len(components)]`; the explicitly written `release.changes` are
  then inserted at position `insert_at` (default: the middle), so that the risky change is
  buried among the noise. The rule is deterministic: the same file always gives the same list.
- `tools.get_release_summary` (a `ToolOverride`) makes the summary tool fail in a given way
  for this scenario only; how the runner produces the failure is described on `ToolOverride`.
- `sources` (a `SourceSet`) instead of `release`: the release is made of real-format files in
  `files/<scenario id>/` (JUnit XML, commits as the ingestion API takes them, OpenMetrics
  text), per release in deploy order, the one under test last. Before the trials the runner
  ingests them through the `sources` services into a hidden service of the scenario's own
  (`evals/scenario_sources.py`), and the summary is the ingested release's, as for a real one.

Validation errors name the file and the field (`high_payment.toml: expect.severity: ...`), and
every file is checked before anything is reported, so one run of the loader lists all problems.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from evals.scenario_release import (
    GeneratedChanges,
    ReleaseData,
    SourceRelease,
    SourceSet,
    Strict,
    TestResults,
    ToolOverride,
    ToolOverrides,
)

Severity = Literal["high", "medium", "low"]
SEVERITIES: tuple[Severity, ...] = ("high", "medium", "low")

SUMMARY_TOOL = "get_release_summary"
REPORT_TOOL = "file_risk_report"
# The drill-downs the larger models' profile offers (the small profile gets none).
DRILL_DOWN_TOOLS: frozenset[str] = frozenset(
    {
        "get_test_details",
        "get_code_changes",
        "get_metric_history",
        "get_failure_suspects",
        "get_observability_traces",
    }
)
# Tools the agent has; expectations naming any other tool are a typo in a scenario file.
KNOWN_TOOLS: frozenset[str] = frozenset({SUMMARY_TOOL, REPORT_TOOL, *DRILL_DOWN_TOOLS})

DEFAULT_SUITE_DIR = Path(__file__).resolve().parent / "scenarios"
MANIFEST_NAME = "suite.toml"
# Where the scenarios made of files keep them: `<suite>/files/<scenario id>/`.
FILES_DIR = "files"

# Dimensions the deterministic evaluators produce (the optional judge adds "judge").
DIMENSIONS: tuple[str, ...] = ("tool_usage", "decision_quality", "error_handling")


class ScenarioError(ValueError):
    """One or more scenario files are invalid; the message lists every problem found."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("invalid scenario suite:\n" + "\n".join(f"  {p}" for p in problems))


# Re-exported: the scenario models are read as `evals.scenario`'s.
__all__ = [
    "GeneratedChanges",
    "ReleaseData",
    "SourceRelease",
    "SourceSet",
    "TestResults",
    "ToolOverride",
    "ToolOverrides",
]


class KeywordGroup(Strict):
    """One idea the agent's text must (or must not) contain, in any of several wordings.

    Matching is tolerant (see `evals.evaluators.matching`): case, punctuation, plural and
    -ing/-ed endings are ignored, a word of four letters or more also matches words it begins
    (`auth` matches `authentication`), and the words of a phrase may come in any order within a
    short window (`test failures` matches `2 tests failed`).
    """

    name: str = Field(min_length=1)
    any_of: list[str] = Field(min_length=1)

    @model_validator(mode="after")
    def _no_blank_phrases(self) -> KeywordGroup:
        if any(not phrase.strip() for phrase in self.any_of):
            raise ValueError("any_of holds an empty phrase")
        return self


class ToolExpectations(Strict):
    must_call: list[str] = Field(default_factory=lambda: [SUMMARY_TOOL])
    must_not_call: list[str] = Field(default_factory=list)
    # The first call of each tool named here must come in this order.
    order: list[str] = Field(default_factory=list)
    # More calls than this to the summary tool is a loop, not a retry.
    max_summary_calls: int = Field(default=3, ge=1)
    # Drill-downs the agent must have called before its (first) filing, e.g. the failing
    # tests' details before filing high. Checked only where the agent was offered the tool
    # (the larger models' profile; the small one gets the drill-downs' findings as evidence).
    must_call_before_filing: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _known_and_consistent(self) -> ToolExpectations:
        for name in [
            *self.must_call,
            *self.must_not_call,
            *self.order,
            *self.must_call_before_filing,
        ]:
            if name not in KNOWN_TOOLS:
                raise ValueError(f"unknown tool {name!r} (known: {', '.join(sorted(KNOWN_TOOLS))})")
        both = set(self.must_call) & set(self.must_not_call)
        if both:
            raise ValueError(f"tools both required and forbidden: {', '.join(sorted(both))}")
        if set(self.order) & set(self.must_not_call):
            raise ValueError("a forbidden tool appears in 'order'")
        return self


class Expectations(Strict):
    report_required: bool
    # The preferred severity; `acceptable_severities` widens it for truly ambiguous cases.
    severity: Severity | None = None
    acceptable_severities: list[Severity] | None = None
    key_risks: list[KeywordGroup] = Field(default_factory=list)
    # Claims that would be made up given the data (e.g. "all tests passed" with no tests field).
    forbidden_claims: list[KeywordGroup] = Field(default_factory=list)
    # For failure scenarios: how the final answer must state the failure.
    failure_mentions: KeywordGroup | None = None
    tools: ToolExpectations = Field(default_factory=ToolExpectations)
    # Dimensions that must pass for a trial to pass; None = every applicable deterministic one.
    required_dimensions: list[str] | None = None
    # The commit known to have broken the release (a scenario made of a git history): its
    # subject, or a short sha of 7 or more hex digits. The filed report must name it.
    culprit: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _severity_rules(self) -> Expectations:
        if (
            self.severity
            and self.acceptable_severities
            and (self.severity not in self.acceptable_severities)
        ):
            raise ValueError("severity must be one of acceptable_severities")
        if self.report_required and not (self.severity or self.acceptable_severities):
            raise ValueError("a scenario that requires a report must give a severity")
        if self.report_required and REPORT_TOOL in self.tools.must_not_call:
            raise ValueError(f"report_required but {REPORT_TOOL} is forbidden")
        if self.required_dimensions is not None:
            unknown = set(self.required_dimensions) - {*DIMENSIONS, "judge"}
            if unknown:
                raise ValueError(f"unknown dimensions: {', '.join(sorted(unknown))}")
        return self

    @property
    def acceptable(self) -> frozenset[str]:
        if self.acceptable_severities:
            return frozenset(self.acceptable_severities)
        return frozenset({self.severity}) if self.severity else frozenset()

    @property
    def report_forbidden(self) -> bool:
        return REPORT_TOOL in self.tools.must_not_call


ScenarioKind = Literal["assessment", "missing_release", "tool_failure"]


class Culprit(Strict):
    """The culprit commit as the scenario's ingestion found it in the release under test."""

    sha: str
    subject: str


class Scenario(Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_]*$")
    title: str = Field(min_length=1)
    description: str = ""
    prompt: str = Field(min_length=1)
    # The release the prompt asks about (also when that release does not exist).
    release_id: str = Field(min_length=1)
    release: ReleaseData | None = None
    # The release made of files instead (see SourceSet); `release` is then derived from it.
    sources: SourceSet | None = None
    tools: ToolOverrides = Field(default_factory=ToolOverrides)
    expect: Expectations
    critical: bool = False
    tags: list[str] = Field(default_factory=list)
    # Filed by the ingestion (`with_ingested`): the commit `expect.culprit` names. Not part of
    # the fingerprint: the scenario is its files and its expectations, not this database's rows.
    culprit_commit: Culprit | None = Field(default=None, exclude=True)

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        if self.expect.culprit is not None and self.sources is None:
            raise ValueError("expect.culprit needs a scenario made of files (sources)")
        if self.sources is not None:
            if self.release is not None:
                raise ValueError("give either release or sources: the release is derived")
            if self.sources.under_test.version != self.release_id:
                raise ValueError(
                    f"the last of sources.releases is {self.sources.under_test.version!r}, "
                    f"not the release_id {self.release_id!r}"
                )
        if self.release is not None and self.release.version != self.release_id:
            raise ValueError(
                f"release.version {self.release.version!r} differs from release_id "
                f"{self.release_id!r}"
            )
        if self.release_id not in self.prompt:
            raise ValueError(f"the prompt does not name the release {self.release_id!r}")
        if self.kind != "assessment":
            if self.expect.report_required:
                raise ValueError(
                    "a scenario where the summary cannot be had cannot require a report"
                )
            if self.expect.failure_mentions is None:
                raise ValueError("a failure scenario needs expect.failure_mentions")
        return self

    @property
    def kind(self) -> ScenarioKind:
        if self.release is None and self.sources is None:
            return "missing_release"
        if self.tools.get_release_summary is not None:
            return "tool_failure"
        return "assessment"

    @property
    def is_failure_scenario(self) -> bool:
        return self.kind != "assessment"

    @property
    def summary_served(self) -> bool:
        """Whether the agent can actually obtain the release data."""
        return self.kind == "assessment"

    def release_payload(self) -> dict[str, Any] | None:
        """What the release API should serve for `release_id` (None: answer 404, or a scenario
        made of files that is not ingested yet: see `with_ingested`)."""
        return None if self.release is None else self.release.payload()

    def with_ingested(self, summary: dict[str, Any], culprit: Culprit | None = None) -> Scenario:
        """This scenario made of files, with the summary its ingested release has (and the
        commit its `expect.culprit` names there)."""
        present = {key: value for key, value in summary.items() if value is not None}
        return self.model_copy(
            update={"release": ReleaseData.model_validate(present), "culprit_commit": culprit}
        )

    @property
    def missing_fields(self) -> list[str]:
        """Top-level summary fields this release lacks (changes, tests, deployment_metrics)."""
        if self.release is None:
            return []
        payload = self.release.payload()
        return [f for f in ("changes", "tests", "deployment_metrics") if f not in payload]

    @property
    def fingerprint(self) -> str:
        """A short hash of the whole scenario: a changed scenario is not compared like for like."""
        # A scenario made of files: its files (their digest), not what this database made
        # of them.
        excluded = {"release"} if self.sources is not None else set()
        canonical = json.dumps(
            self.model_dump(mode="json", exclude=excluded), sort_keys=True, separators=(",", ":")
        )
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]


class SuiteManifest(Strict):
    suite_version: str = Field(min_length=1)
    name: str = "detective"
    description: str = ""


class Suite(BaseModel):
    model_config = ConfigDict(frozen=True)

    version: str
    name: str
    description: str = ""
    path: str
    scenarios: list[Scenario]

    def get(self, scenario_id: str) -> Scenario:
        for scenario in self.scenarios:
            if scenario.id == scenario_id:
                return scenario
        raise KeyError(scenario_id)

    @property
    def ids(self) -> list[str]:
        return [s.id for s in self.scenarios]


def _format_error(file: str, error: Any) -> str:
    loc = ".".join(str(part) for part in error["loc"]) or "(file)"
    return f"{file}: {loc}: {error['msg']}"


def _read_toml(path: Path, problems: list[str]) -> dict[str, Any] | None:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        problems.append(f"{path.name}: not valid TOML: {exc}")
    except OSError as exc:
        problems.append(f"{path.name}: cannot be read: {exc}")
    return None


def parse_scenario(data: dict[str, Any], *, source: str = "<data>") -> Scenario:
    """Validate one scenario's data; errors name `source` and the field."""
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError([_format_error(source, e) for e in exc.errors()]) from exc


def select(scenarios: Iterable[Scenario], pattern: str | None) -> list[Scenario]:
    """Scenarios matching `pattern`: comma-separated shell globs on the id (`high_*`), or
    `tag:NAME` for a tag, or `critical`. None or empty selects all."""
    items = list(scenarios)
    if not pattern or not pattern.strip():
        return items
    terms = [t.strip() for t in pattern.split(",") if t.strip()]

    def wanted(s: Scenario) -> bool:
        for term in terms:
            if term == "critical" and s.critical:
                return True
            if term.startswith("tag:") and term[4:] in s.tags:
                return True
            if fnmatch.fnmatchcase(s.id, term):
                return True
        return False

    return [s for s in items if wanted(s)]


def load_suite(
    path: str | Path | None = None,
    pattern: str | None = None,
    *,
    extra_dirs: Iterable[str | Path] = (),
) -> Suite:
    """Load and validate the suite in `path` (default `evals/scenarios/`).

    `extra_dirs` add the scenario files of other directories (no manifest there: reviewers'
    labels exported by the site, see `review/scenario.py`); a directory that does not
    exist adds nothing. The suite's version then carries a hash of the added scenarios, so a
    run with them is not compared like for like with a run without them.

    Raises ScenarioError listing every invalid file and field; `pattern` (see `select`) then
    narrows the scenarios, and a pattern matching nothing is an error too.
    """
    root = Path(path) if path is not None else DEFAULT_SUITE_DIR
    problems: list[str] = []
    manifest_path = root / MANIFEST_NAME
    manifest: SuiteManifest | None = None
    if not manifest_path.is_file():
        problems.append(f"{manifest_path}: the suite manifest is missing")
    else:
        raw = _read_toml(manifest_path, problems)
        if raw is not None:
            try:
                manifest = SuiteManifest.model_validate(raw)
            except ValidationError as exc:
                problems.extend(_format_error(MANIFEST_NAME, e) for e in exc.errors())

    scenarios: list[Scenario] = []
    seen: dict[str, str] = {}
    _read_dir(root, scenarios, seen, problems)
    if not scenarios and not problems:
        problems.append(f"{root}: no scenario files")
    added: list[Scenario] = []
    for extra in extra_dirs:
        if Path(extra).is_dir():
            _read_dir(Path(extra), added, seen, problems)
    if problems:
        raise ScenarioError(problems)
    assert manifest is not None
    version = manifest.suite_version
    if added:
        prints = ",".join(sorted(s.fingerprint for s in added))
        version += f"+review.{hashlib.sha256(prints.encode()).hexdigest()[:8]}"
    chosen = select([*scenarios, *added], pattern)
    if not chosen:
        raise ScenarioError([f"no scenario matches {pattern!r}"])
    return Suite(
        version=version,
        name=manifest.name,
        description=manifest.description,
        path=str(root),
        scenarios=chosen,
    )


def _with_files(scenario: Scenario, directory: Path, source: str, problems: list[str]) -> Scenario:
    """The scenario with where its files are and the digest of their contents."""
    assert scenario.sources is not None
    digest = hashlib.sha256()
    for name in scenario.sources.files():
        path = directory / name
        if not path.resolve().is_relative_to(directory.resolve()) or not path.is_file():
            problems.append(f"{source}: sources: no file {FILES_DIR}/{scenario.id}/{name}")
            continue
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    for folder in scenario.sources.history_folders():
        path = directory / folder
        patches = sorted(path.glob("*.patch")) if path.is_dir() else []
        if not path.resolve().is_relative_to(directory.resolve()) or not patches:
            problems.append(
                f"{source}: sources: no patch in {FILES_DIR}/{scenario.id}/{folder}/ (a "
                "history is a folder of `git format-patch` files)"
            )
            continue
        for patch in patches:
            name = f"{folder}/{patch.name}"
            digest.update(name.encode() + b"\0" + patch.read_bytes() + b"\0")
    sources = scenario.sources.model_copy(
        update={"directory": str(directory), "digest": digest.hexdigest()[:16]}
    )
    return scenario.model_copy(update={"sources": sources})


def _read_dir(
    root: Path, scenarios: list[Scenario], seen: dict[str, str], problems: list[str]
) -> None:
    for file in sorted(root.glob("*.toml")):
        if file.name == MANIFEST_NAME:
            continue
        raw = _read_toml(file, problems)
        if raw is None:
            continue
        try:
            scenario = parse_scenario(raw, source=file.name)
        except ScenarioError as exc:
            problems.extend(exc.problems)
            continue
        if scenario.id != file.stem:
            problems.append(f"{file.name}: id: {scenario.id!r} differs from the file name")
        if scenario.sources is not None:
            scenario = _with_files(scenario, root / FILES_DIR / scenario.id, file.name, problems)
        if scenario.id in seen:
            problems.append(f"{file.name}: id: {scenario.id!r} already used by {seen[scenario.id]}")
        seen[scenario.id] = file.name
        scenarios.append(scenario)
