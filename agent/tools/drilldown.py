"""The investigation tools: drill down from a release's summary into its detail.

- `get_test_details`: the tests (failed first), each with its file, failure and history in
  the service: new failure, or known flaky;
- `get_code_changes`: the commits with their files and lines, the critical areas they touch
  and whether their authors are new to the service;
- `get_metric_history`: one metric against the baseline window and earlier releases, with the
  metric judge's verdict in words;
- `get_failure_suspects`: one failed test's suspect commits, with the frames its failure runs
  through and the lines each suspect changed (`/suspects?test=`).

Each reads an endpoint of the release API beside the summary (`/api/releases/<id>/tests`,
`/changes`, `/metrics/<metric>/history`) through `ReleaseTools.read`: same token, retry and
error handling. The answer reaches the model as untrusted data (`encode_data`), with a few
lines in front (`in_short`) that say what the page shows, for the model to cite and for the
run page to show first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from pydantic import Field

from agent.errors import InvalidArgumentsError
from agent.tools.decorator import Tool, method_tool
from agent.tools.registry import ToolOutcome, ToolRegistry
from agent.tools.release_tools import ReleaseTools, path_segment
from agent.tools.untrusted import encode_data

TestStatus = Literal["failed", "flaky", "passed", "skipped", "all"]
Limit = Annotated[int, Field(ge=1, le=100)]
Offset = Annotated[int, Field(ge=0)]
ReleaseId = Annotated[str, Field(min_length=1)]
MAX_LINES = 25


class DrillDownTools:
    """The investigation tools, over the release tools' connection to the release API."""

    def __init__(self, release_tools: ReleaseTools) -> None:
        self.release_tools = release_tools

    def __repr__(self) -> str:
        return f"DrillDownTools({self.release_tools!r})"

    def tools(self) -> list[Tool[..., Any]]:
        deadline = self.release_tools.deadline_s
        return [
            method_tool(self.get_test_details, name="get_test_details", timeout_s=deadline),
            method_tool(self.get_code_changes, name="get_code_changes", timeout_s=deadline),
            method_tool(self.get_metric_history, name="get_metric_history", timeout_s=deadline),
            method_tool(self.get_failure_suspects, name="get_failure_suspects", timeout_s=deadline),
        ]

    def register(self, registry: ToolRegistry) -> None:
        for drill_down in self.tools():
            registry.register_function(drill_down)

    async def get_test_details(
        self,
        release_id: ReleaseId,
        status: TestStatus = "failed",
        name_contains: str = "",
        limit: Limit = 20,
        offset: Offset = 0,
    ) -> ToolOutcome:
        """The release's tests one by one: status, file, suite, duration, failure message and
        history in this service (a new failure, or known flaky: it failed on and off in the
        last releases or failed and passed on the same commit).

        Use it when the summary shows failed or flaky tests, to tell a new failure from a
        known flaky one and to see which code the failures are in. Cite the tests by name.

        Args:
            release_id: The release under assessment, for example "v2.1.0".
            status: Which tests: "failed" (the default), "flaky", "passed", "skipped" or "all".
            name_contains: Only tests whose name, class or file contains this text.
            limit: How many tests at most (1 to 100).
            offset: Where the page starts: the "next_offset" of the previous page.
        """
        query = {
            "status": "" if status == "all" else status,
            "name_contains": name_contains,
            "limit": limit,
            "offset": offset,
        }
        return await self._read(release_id, "tests", query, "The test details", _test_lines)

    async def get_code_changes(
        self,
        release_id: ReleaseId,
        path_prefix: str = "",
        area: Annotated[str, Field(max_length=100)] = "",
        limit: Limit = 20,
        offset: Offset = 0,
    ) -> ToolOutcome:
        """The release's commits: type, scope, breaking or not, author (and the author's
        earlier commits in this service), files with lines added and deleted, the critical
        areas each touches, and the totals.

        Use it when the summary shows changes in a critical area, a large change, or test
        failures you want to correlate with the code that changed. Cite the commits by
        subject and short sha.

        Args:
            release_id: The release under assessment, for example "v2.1.0".
            path_prefix: Only files under this path, for example "src/payments/".
            area: Only commits in this critical area of the risk policy (by default
                payments, auth, security, data or migrations); empty for all.
            limit: How many commits at most (1 to 100).
            offset: Where the page starts: the "next_offset" of the previous page.
        """
        query = {"path_prefix": path_prefix, "area": area, "limit": limit, "offset": offset}
        return await self._read(release_id, "changes", query, "The code changes", _change_lines)

    async def get_metric_history(
        self, release_id: ReleaseId, metric: Annotated[str, Field(min_length=1, max_length=200)]
    ) -> ToolOutcome:
        """One deployment metric of the release against its baseline window and the earlier
        releases of the same service: sample counts, medians and spreads, and the metric
        judge's verdict (pass, fail, or too little data) with its reason in a sentence.

        Use it when the summary's error rate or latency concerns you, or looks fine but you
        want to know whether it is normal for this service. Cite the judge's sentence.

        Args:
            release_id: The release under assessment, for example "v2.1.0".
            metric: "error_rate" or "response_time_p95" (the summary's names).
        """
        path = f"metrics/{path_segment(metric)}/history"
        return await self._read(release_id, path, {}, f"The history of {metric!r}", _metric_lines)

    async def get_failure_suspects(
        self, release_id: ReleaseId, test: Annotated[str, Field(min_length=1, max_length=200)]
    ) -> ToolOutcome:
        """Which commits of the release may have broken one failed test: the frames its
        failure runs through (file, line, function), the suspect commits most likely first
        (on the failure's path, then the code the test exercises, then the test file), and the
        lines each suspect changed.

        Use it for a new failure (not known flaky), to name the change that broke it. Cite
        the suspect by short sha, subject and author, and the file and line.

        Args:
            release_id: The release under assessment, for example "v2.1.0".
            test: The failed test's name, or classname::name, for example "test_max_age".
        """
        query = {"test": test}
        return await self._read(
            release_id, "suspects", query, f"The suspects of {test!r}", _suspect_lines
        )

    async def _read(
        self,
        release_id: str,
        path: str,
        query: Mapping[str, Any],
        what: str,
        lines: Any,
    ) -> ToolOutcome:
        assessed = self.release_tools.release_id
        if assessed is not None and release_id != assessed:
            return ToolOutcome.failure(
                f"Refused: this assessment is for release {assessed!r}; ask about "
                f"{assessed!r}, not {release_id!r}.",
                error_type=InvalidArgumentsError.__name__,
            )
        asked = {name: value for name, value in query.items() if value not in ("", None)}
        url = f"/api/releases/{path_segment(release_id)}/{path}"
        if asked:
            url += "?" + urlencode(asked)
        body = await self.release_tools.read(url, f"{what} of release {release_id!r}")
        if isinstance(body, ToolOutcome):
            return body
        if not isinstance(body, dict):
            return ToolOutcome.failure(f"{what} of release {release_id!r}: not a JSON object.")
        shown = {"in_short": lines(body)[:MAX_LINES], **body}
        # The release's text is its authors', never instructions: JSON that cannot spell
        # the chat template's markup.
        return ToolOutcome(content=encode_data(shown), data=body)


def register_drill_down_tools(
    registry: ToolRegistry, release_tools: ReleaseTools
) -> DrillDownTools:
    drill_down = DrillDownTools(release_tools)
    drill_down.register(registry)
    return drill_down


# ---- the lines in front -----------------------------------------------------------------------


def _count(n: Any, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _page(body: Mapping[str, Any], noun: str) -> str:
    total, returned = body.get("total", 0), body.get("returned", 0)
    line = f"{returned} of {total} {noun} shown"
    following = body.get("next_offset")
    return line + (f"; the next page starts at offset {following}" if following else "")


def _test_lines(body: Mapping[str, Any]) -> list[str]:
    lines = [_page(body, "tests")]
    for test in body.get("tests") or []:
        history = test.get("history") or {}
        where = test.get("file") or test.get("classname") or test.get("suite") or "?"
        line = f"{test.get('name')} ({where}): {test.get('status')}"
        if test.get("failure_type"):
            line += f", {test['failure_type']}"
        looked = history.get("releases_looked_at", 0)
        if looked:
            failed = history.get("failed_in_last_releases", 0)
            line += f"; failed in {failed} of the last {looked} releases"
            if history.get("flaky_in_last_releases"):
                line += f", flaky in {history['flaky_in_last_releases']}"
        if history.get("known_flaky"):
            line += ": known flaky"
        elif history.get("new_failure"):
            line += ": a new failure"
        lines.append(line)
    return lines


def _change_lines(body: Mapping[str, Any]) -> list[str]:
    totals = (body.get("totals") or {}).get("release") or {}
    areas = body.get("critical_areas_touched") or {}
    lines = [
        _page(body, "commits"),
        f"the release: {totals.get('commits', 0)} commits, {totals.get('files', 0)} files in "
        f"{totals.get('directories', 0)} directories, +{totals.get('lines_added', 0)} "
        f"-{totals.get('lines_deleted', 0)} lines",
        "critical areas touched: "
        + (", ".join(f"{area} ({_count(n, 'commit')})" for area, n in areas.items()) or "none"),
    ]
    for commit in body.get("commits") or []:
        line = f"{commit.get('sha', '')[:7]} {commit.get('subject')}"
        line += f": +{commit.get('lines_added', 0)} -{commit.get('lines_deleted', 0)} lines"
        line += f" in {_count(commit.get('file_count', 0), 'file')} by {commit.get('author')}"
        if commit.get("author_earlier_commits_in_service") == 0:
            line += " (new to this service)"
        if commit.get("breaking"):
            line += "; breaking"
        if commit.get("critical_areas"):
            line += "; " + ", ".join(commit["critical_areas"])
        lines.append(line)
    return lines


def _metric_lines(body: Mapping[str, Any]) -> list[str]:
    lines = []
    for key, against in (
        ("judgement_against_baseline", "against the baseline window"),
        ("judgement_against_earlier_releases", "against the earlier releases"),
    ):
        judged = body.get(key) or {}
        if judged:
            lines.append(f"{against}: {judged.get('outcome')}. {judged.get('sentence')}")
    for earlier in body.get("earlier_releases") or []:
        if earlier.get("samples"):
            lines.append(
                f"{earlier.get('release_id')}: median {earlier.get('median')} over "
                f"{earlier.get('samples')} samples"
            )
    return lines


def _suspect_lines(body: Mapping[str, Any]) -> list[str]:
    lines = [str(body.get("summary") or "")]
    for frame in (body.get("frames") or [])[:5]:
        if frame.get("in_repo"):
            lines.append(
                f"frame: {frame.get('path')} line {frame.get('line')} {frame.get('function')}"
            )
    for suspect in body.get("suspects") or []:
        lines.append(
            f"{suspect.get('rank')}. {suspect.get('short_sha')} '{suspect.get('subject')}' "
            f"({suspect.get('author')}), {suspect.get('tier')}: {suspect.get('reason')}"
        )
    return lines
