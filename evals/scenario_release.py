"""What a scenario's release is made of: its data written inline (`ReleaseData`, with the
generated changes of the context-pressure scenarios), the summary tool's failure for it
(`ToolOverride`), or real-format files of its service's releases (`SourceSet`). Loaded and
validated by `evals/scenario.py`; the rules are in its docstring."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TestResults(Strict):
    """The `tests` block of a release summary; any field may be absent."""

    __test__ = False  # not a pytest test class, despite its name

    passed: int | None = Field(default=None, ge=0)
    failed: int | None = Field(default=None, ge=0)
    skipped: int | None = Field(default=None, ge=0)
    failing_tests: list[str] | None = None
    # What a release ingested from JUnit XML also counts (sources/summary.py).
    flaky: int | None = Field(default=None, ge=0)
    flaky_tests: list[str] | None = None


class GeneratedChanges(Strict):
    """Many changes from a small rule (see the module docstring)."""

    count: int = Field(ge=1, le=5000)
    templates: list[str] = Field(min_length=1)
    components: list[str] = Field(min_length=1)
    insert_at: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _templates_have_component(self) -> GeneratedChanges:
        for template in self.templates:
            try:
                template.format(component="x")
            except (KeyError, IndexError, ValueError) as exc:
                raise ValueError(
                    f"template {template!r} may only use the placeholder {{component}}"
                ) from exc
        return self

    def expand(self, explicit: list[str]) -> list[str]:
        t = len(self.templates)
        generated = [
            self.templates[i % t].format(component=self.components[(i // t) % len(self.components)])
            for i in range(self.count)
        ]
        at = self.count // 2 if self.insert_at is None else min(self.insert_at, self.count)
        return generated[:at] + list(explicit) + generated[at:]


class ReleaseData(BaseModel):
    """A release as `get_release_summary` serves it. Unknown fields are kept and served."""

    model_config = ConfigDict(extra="allow", frozen=True)

    version: str = Field(min_length=1)
    changes: list[str] | None = None
    generated_changes: GeneratedChanges | None = None
    tests: TestResults | None = None
    deployment_metrics: dict[str, float | int | str | None] | None = None

    def payload(self) -> dict[str, Any]:
        """The JSON the summary tool returns: absent fields left out, generated changes expanded."""
        data = self.model_dump(mode="json", exclude_none=True, exclude={"generated_changes"})
        if self.generated_changes is not None:
            data["changes"] = self.generated_changes.expand(self.changes or [])
        return data


class ToolOverride(Strict):
    """Make a tool fail for one scenario.

    - `http_error`: the release API answers `status` (default 500) with `body` (default a
      generic error text) instead of the summary.
    - `timeout`: the API does not answer within the tool's timeout (`delay_s`, default 60 s,
      is how long it hangs; the runner may shorten the tool's own timeout instead of waiting).
    - `malformed_json`: the API answers 200 with `body`, which is not valid JSON.
    """

    mode: Literal["http_error", "timeout", "malformed_json"]
    status: int = Field(default=500, ge=400, le=599)
    body: str | None = None
    delay_s: float = Field(default=60.0, gt=0)

    @model_validator(mode="after")
    def _malformed_needs_body(self) -> ToolOverride:
        if self.mode == "malformed_json":
            if not self.body:
                raise ValueError("mode 'malformed_json' needs a 'body'")
            try:
                json.loads(self.body)
            except ValueError:
                return self
            raise ValueError("the 'body' of a malformed_json override must not be valid JSON")
        return self


class ToolOverrides(Strict):
    get_release_summary: ToolOverride | None = None


class SourceRelease(Strict):
    """One release of a scenario's service, as files under `files/<scenario id>/` (paths
    relative to it). Metrics samples count in the window their timestamps lie in: the
    release's (30 minutes from its deploy) or its baseline's (the previous release's)."""

    version: str = Field(min_length=1)
    deployed_at: datetime
    title: str | None = None
    junit: list[str] = Field(default_factory=list)
    commits: str | None = None  # a JSON list of commits, as POST .../commits takes them
    # Or a folder of `git format-patch` files: this release's commits, replayed on top of the
    # previous release's into a repository of the scenario's own (evals/scenario_git.py), so
    # that the ingestion reads a real range and ranks the failures' suspect commits.
    history: str | None = None
    metrics: str | None = None  # OpenMetrics (or Prometheus) text
    # The running version's spans as an OTLP exporter sends them (OTLP/JSON, an
    # ExportTraceServiceRequest with hex ids), ingested as `POST /otlp/v1/traces` ingests them.
    traces: str | None = None

    @model_validator(mode="after")
    def _one_kind_of_commits(self) -> SourceRelease:
        if self.commits is not None and self.history is not None:
            raise ValueError("give either commits (JSON) or history (patches), not both")
        return self


class SourceSet(Strict):
    """A scenario's release made of files: its service's releases in deploy order, the one
    under test last (its version is the scenario's `release_id`)."""

    releases: list[SourceRelease] = Field(min_length=1)
    # Filled by the loader: where the files are (not part of the fingerprint: the same files
    # in another checkout are the same scenario), and a hash of their contents (part of it).
    directory: str = Field(default="", exclude=True)
    digest: str = ""

    @model_validator(mode="after")
    def _in_deploy_order(self) -> SourceSet:
        versions = [r.version for r in self.releases]
        if len(set(versions)) != len(versions):
            raise ValueError("a version appears twice in sources.releases")
        times = [r.deployed_at for r in self.releases]
        if times != sorted(times) or len(set(times)) != len(times):
            raise ValueError("sources.releases must be in deploy order, each deployed later")
        histories = [r.history is not None for r in self.releases]
        if any(histories) and not all(histories):
            # One repository's history: a release without its patches would break the chain.
            raise ValueError("either every release of sources.releases has a history, or none")
        return self

    @property
    def has_history(self) -> bool:
        return self.under_test.history is not None

    @property
    def under_test(self) -> SourceRelease:
        return self.releases[-1]

    def files(self) -> list[str]:
        """The files named, each once (a history is its folder: see `history_folders`)."""
        return sorted(
            {
                name
                for r in self.releases
                for name in [*r.junit, r.commits, r.metrics, r.traces]
                if name is not None
            }
        )

    def history_folders(self) -> list[str]:
        return [r.history for r in self.releases if r.history is not None]
