"""The release API as tools for the model: read a release's summary, file a risk report.
Over 600 lines: both tools and the drill-downs' `read` share one client, its retries and its
wording of failures; cut apart, each half would need the other's private parts.

```python
tools = register_release_tools(registry, "http://localhost:8000", token=..., release_id="v2.1.0")
...
await tools.aclose()
```

Every failure (the release does not exist, the API is down or slow, it answered something
that is not JSON) comes back to the model as a failed result that says plainly what went
wrong, so that it can say so in its report instead of guessing. Filing a report is
terminal: it ends the run, because small models otherwise file again and again.

The API token is only ever put in the `Authorization` header. Messages are built from
status codes and our own words; the little response text quoted back to the model is
scrubbed of the token first.

The drill-downs (test details, code changes, a metric's history) are in `drilldown.py` beside
this module; they read through `read`, with the same HTTP, retry and error handling.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal
from urllib.parse import quote

import httpx
from opentelemetry import trace
from pydantic import Field

from agent.errors import InvalidArgumentsError, ToolExecutionError, redact
from agent.tls import async_client
from agent.tools.decorator import Tool, method_tool
from agent.tools.registry import ToolOutcome, ToolRegistry
from agent.tools.untrusted import encode_data, neutralise

SUMMARY_TOOL = "get_release_summary"

logger = logging.getLogger("agent.tools.release")

Severity = Literal["high", "medium", "low"]
HeadersHook = Callable[[], Mapping[str, str]]

DEFAULT_TIMEOUT_S = 10.0
SUMMARY_RETRY_DELAY_S = 0.5
# Nothing listening at the API's address (its web server restarting under `up`): the request
# was not sent, so it is sent again, every RECONNECT_DELAY_S at most, until the deadline.
RECONNECT_DELAY_S = 1.0
# The registry's own deadline is a backstop: ours fires first and explains itself better.
REGISTRY_GRACE_S = 5.0
MAX_QUOTED_BODY_CHARS = 300
MAX_REFUSAL_CHARS = 4000


@dataclass(frozen=True, slots=True)
class _Reply:
    status: int
    reason: str
    text: str

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def describe(self) -> str:
        return f"{self.status} {self.reason}".strip()


class _Unavailable(Exception):
    """The API could not be asked, or did not answer in time."""


@dataclass(slots=True)
class _Attempt:
    """What one request met on its way: the refused connection it is trying again after."""

    refused: httpx.ConnectError | None = None


def _note_retry(failure: ToolOutcome) -> None:
    """Record on the tool's span (`execute_tool {name}`) that the call asks again, and why."""
    reason = "timeout" if "did not answer within" in failure.content else "unavailable"
    span = trace.get_current_span()
    span.set_attributes({"detective.tool.retry.count": 1, "detective.tool.retry.reason": reason})
    span.add_event("detective.tool.retry", {"detective.tool.retry.reason": reason})


class ReleaseTools:
    """The release tools, bound to one release API (and, usually, one release)."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        release_id: str | None = None,
        client: httpx.AsyncClient | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        extra_headers: HeadersHook | None = None,
        summary_retry_delay_s: float = SUMMARY_RETRY_DELAY_S,
        with_summary: bool = True,
        brief_summary: bool = False,
        reconnect: bool = True,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        # False: file_risk_report has no summary field (a prompt profile that wants none).
        self.with_summary = with_summary
        # True: the summary's brief view (`?view=brief`), for a model that copies the policy's
        # evidence: without the signals it repeats, or the drill-downs it has no tools for.
        self.brief_summary = brief_summary
        self.reconnect = reconnect
        self.summary_retry_delay_s = summary_retry_delay_s
        # The release under assessment; when set, reports may be filed for it alone.
        self.release_id = release_id
        self.timeout_s = timeout_s
        self._token = token
        self._extra_headers = extra_headers
        self._owns_client = client is None
        self._client = client or async_client(timeout=timeout_s)
        self._filed: dict[str, str | None] = {}
        # GETs being served, by URL: a retry joins one instead of sending it again.
        self._in_flight: dict[str, tuple[asyncio.Future[_Reply], _Attempt]] = {}
        # The releases whose summary this assessment has read; why the last read failed.
        self._summaries_read: set[str] = set()
        self._summary_problems: dict[str, str] = {}
        # The keyed evidence of each summary read in the brief view ({"E1": sentence}), which a
        # brief filing cites by key.
        self._evidence: dict[str, dict[str, str]] = {}

    def __repr__(self) -> str:
        # Never the token.
        return f"ReleaseTools({self.base_url!r}, release_id={self.release_id!r})"

    @property
    def deadline_s(self) -> float:
        """A tool's deadline: it may ask twice (a blip is asked again), each within timeout_s."""
        return 2 * self.timeout_s + self.summary_retry_delay_s + REGISTRY_GRACE_S

    def tools(self) -> list[Tool[..., Any]]:
        deadline = self.deadline_s
        return [
            method_tool(self.get_release_summary, name=SUMMARY_TOOL, timeout_s=deadline),
            method_tool(
                self.file_risk_report if self.with_summary else self.file_risk_report_brief,
                name="file_risk_report",
                timeout_s=deadline,
            ),
        ]

    def register(self, registry: ToolRegistry) -> None:
        for release_tool in self.tools():
            registry.register_function(release_tool)

    async def aclose(self) -> None:
        for task, _ in list(self._in_flight.values()):
            task.cancel()
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> ReleaseTools:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def get_release_summary(
        self, release_id: Annotated[str, Field(min_length=1)]
    ) -> ToolOutcome:
        """Fetch the summary of a release: what changed, test results and deployment metrics.

        Call this first, before judging a release's risk, and base your assessment on what
        it returns. If it fails, do not guess the missing data: say in your findings that
        the summary was unavailable, and why.

        Args:
            release_id: The release to look up, for example "v2.1.0".
        """
        outcome, transient = await self._fetch_summary(release_id)
        if transient:
            # A blip of the API (5xx, timeout, unreachable) is worth one more try; after a
            # timeout the try waits for the request still being served (`_send`).
            _note_retry(outcome)
            await asyncio.sleep(self.summary_retry_delay_s)
            outcome, transient = await self._fetch_summary(release_id)
        if not outcome.success and release_id == self.release_id:
            outcome = _ends_the_run(outcome)
        return self._note_summary(release_id, outcome)

    async def _fetch_summary(self, release_id: str) -> tuple[ToolOutcome, bool]:
        """The outcome, and whether its failure may pass if asked again."""
        try:
            view = "?view=brief" if self.brief_summary else ""
            reply = await self._send(
                "GET", f"/api/releases/{path_segment(release_id)}/summary{view}"
            )
        except _Unavailable as error:
            return _no_summary(
                f"The summary of release {release_id!r} is unavailable: {error}."
            ), True
        if reply.status == 404:
            return _no_summary(
                f"Release {release_id!r} does not exist (the release API answered "
                f"{reply.describe()}). Check the release id.",
                error_type=InvalidArgumentsError.__name__,
            ), False
        if not reply.ok:
            return _no_summary(
                f"The summary of release {release_id!r} is unavailable: the release API "
                f"answered {reply.describe()}.{self._quote(reply)}"
            ), reply.status >= 500
        try:
            summary = json.loads(reply.text)
        except ValueError:
            return _no_summary(
                f"The summary of release {release_id!r} is unavailable: the release API sent "
                "a response that is not valid JSON."
            ), False
        return ToolOutcome(
            # The release's text is the release author's, never instructions: it reaches the
            # model as JSON that cannot spell the chat template's markup. The brief view's
            # reader pays for every token of indentation (about 40 in a summary).
            content=encode_data(summary, indent=None if self.brief_summary else 2),
            data=summary if isinstance(summary, dict) else {"summary": summary},
        ), False

    async def read(self, path: str, what: str) -> Any | ToolOutcome:
        """GET `path` (with its query) of the release API: the JSON it answered, or a failed
        outcome that says plainly what went wrong. A blip (a 5xx, a timeout, nothing
        listening) is asked once more, as for the summary."""
        failure, transient = await self._read_once(path, what)
        if transient:
            _note_retry(failure)
            await asyncio.sleep(self.summary_retry_delay_s)
            failure, transient = await self._read_once(path, what)
        return failure

    async def _read_once(self, path: str, what: str) -> tuple[Any | ToolOutcome, bool]:
        try:
            reply = await self._send("GET", path)
        except _Unavailable as error:
            return ToolOutcome.failure(f"{what} could not be read: {error}."), True
        if reply.ok:
            try:
                return json.loads(reply.text), False
            except ValueError:
                return ToolOutcome.failure(
                    f"{what} could not be read: the release API sent a response that is not "
                    "valid JSON."
                ), False
        said = _error_text(reply.text)
        detail = f" It said: {said}" if said else self._quote(reply)
        error_type = (
            InvalidArgumentsError.__name__
            if reply.status in (400, 403, 404)
            else ToolExecutionError.__name__
        )
        return ToolOutcome.failure(
            f"{what} could not be read: the release API answered {reply.describe()}.{detail}",
            error_type=error_type,
        ), reply.status >= 500

    def _note_summary(self, release_id: str, outcome: ToolOutcome) -> ToolOutcome:
        if outcome.success:
            self._summaries_read.add(release_id)
            self._summary_problems.pop(release_id, None)
            self._evidence[release_id] = keyed_evidence(outcome.data)
        else:
            self._summary_problems[release_id] = outcome.content
        return outcome

    async def file_risk_report_brief(
        self,
        release_id: Annotated[str, Field(min_length=1)],
        severity: Severity,
        evidence: Annotated[list[str], Field(min_length=1)],
    ) -> ToolOutcome:
        """File the risk report for the release under assessment. This ends the assessment.

        Call it exactly once, after you have read the release summary. A filed report cannot
        be changed.

        Args:
            release_id: The release the report is about: the one you were asked to assess.
            severity: The overall risk: "high", "medium" or "low".
            evidence: The keys of the policy's evidence the report rests on, such as
                ["E1", "E2"]: the keys only, never the sentences.
        """
        # A key stands for its sentence, which is what is filed. Keys instead of sentences: a
        # 1.5B model on two cores writes about 25 tokens a second, and copying five sentences
        # out took it longer than the rest of the assessment. Told to put keys in a field
        # named "findings", it wrote the sentences anyway. The API refuses what is no key of
        # the summary (issue 40); a blank item is refused here, as the API would name "findings".
        known = self._evidence.get(release_id, {})
        if blank := [str(n) for n, item in enumerate(evidence, start=1) if not item.strip()]:
            return ToolOutcome.failure(
                f"Refused: evidence item {', '.join(blank)} is empty. List only the keys of the "
                f"summary's evidence, each once: {', '.join(known) or 'none'}.",
                error_type=InvalidArgumentsError.__name__,
            )
        findings = [known.get(item.strip().rstrip(".").upper(), item) for item in evidence]
        return await self.file_risk_report(release_id, severity, findings)

    async def file_risk_report(
        self,
        release_id: Annotated[str, Field(min_length=1)],
        severity: Severity,
        findings: Annotated[list[str], Field(min_length=1)],
        summary: str = "",
    ) -> ToolOutcome:
        """File the risk report for the release under assessment. This ends the assessment.

        Call it exactly once, after you have read the release summary, choosing the severity
        by the severity guidelines in your system prompt. A filed report cannot be changed.

        Args:
            release_id: The release the report is about: the one you were asked to assess.
            severity: The overall risk: "high", "medium" or "low".
            findings: The risks you identified, one per item, each citing the figures of the
                release summary it rests on, exactly as the summary gives them.
            summary: One or two sentences explaining the severity you chose.
        """
        if self.release_id is not None and release_id != self.release_id:
            return ToolOutcome.failure(
                f"Refused: this assessment is for release {self.release_id!r}, so a risk "
                f"report can only be filed for {self.release_id!r}, not {release_id!r}. "
                f"Call file_risk_report again with release_id {self.release_id!r}.",
                error_type=InvalidArgumentsError.__name__,
            )
        if release_id in self._filed and self.release_id is not None:
            return ToolOutcome.failure(
                f"A risk report ({self._filed[release_id] or 'no id'}) has already been filed "
                f"for release {release_id!r}. The assessment is complete; do not file again."
            )
        if self.release_id is not None and release_id not in self._summaries_read:
            # A report must rest on the release's data: never one guessed after the summary
            # failed (small models file "low" after an HTTP 500) or was never asked for.
            problem = self._summary_problems.get(release_id)
            why = f" (it failed: {problem})" if problem else ""
            return ToolOutcome.failure(
                f"Refused: the summary of release {release_id!r} has not been read in this "
                f"assessment{why}, and a risk report must rest on it. Call "
                f"get_release_summary first; if it stays unavailable, file no report and say "
                f"in your answer that the summary is unavailable, and why."
            )
        report = {
            "release_id": release_id,
            "severity": severity,
            "findings": findings,
            "summary": summary,
        }
        try:
            reply = await self._send("POST", "/api/risk-reports", payload=report)
        except _Unavailable as error:
            return ToolOutcome.failure(
                f"The risk report could not be filed: {error}. It is unknown whether it "
                "reached the release API; you may call file_risk_report once more."
            )
        if reply.status == 404:
            return ToolOutcome.failure(
                f"Release {release_id!r} does not exist (the release API answered "
                f"{reply.describe()}), so no report was filed.",
                error_type=InvalidArgumentsError.__name__,
            )
        if reply.status == 422:
            # The policy refused the report: its reasons are the point, so all of them.
            return ToolOutcome.failure(
                _error_text(reply.text)
                or f"The release API refused the report ({reply.describe()}).",
                error_type=InvalidArgumentsError.__name__,
            )
        if reply.status == 400:
            return ToolOutcome.failure(
                f"The release API rejected the report ({reply.describe()}).{self._quote(reply)}"
                " Correct it and call file_risk_report again.",
                error_type=InvalidArgumentsError.__name__,
            )
        if not reply.ok:
            return ToolOutcome.failure(
                f"The risk report was not filed: the release API answered "
                f"{reply.describe()}.{self._quote(reply)}",
                error_type=ToolExecutionError.__name__,
            )
        report_id = _report_id(reply.text)
        self._filed[release_id] = report_id
        logger.info(
            "risk report filed",
            extra={"release_id": release_id, "severity": severity, "report_id": report_id},
        )
        return ToolOutcome(
            content=(
                f"Risk report {report_id or '(no id returned)'} filed for release "
                f"{release_id!r} with severity {severity}. The assessment is complete."
            ),
            data={"report_id": report_id, **report},
            terminal=True,
        )

    async def _send(
        self, method: str, path: str, *, payload: dict[str, Any] | None = None
    ) -> _Reply:
        """Send a request; a GET still being served when its attempt timed out is joined, not
        sent again: the retry after a timeout waits for the same request (measured under load:
        the summary's first request took over 10 s, and the retry doubled the server's work)."""
        url = f"{self.base_url}{path}"
        if method != "GET":
            return await self._send_now(method, url, payload, _Attempt(), self.timeout_s)
        running = self._in_flight.get(url)
        if running is not None and not running[0].done():
            task, attempt = running
            trace.get_current_span().set_attribute("detective.tool.joined_in_flight", True)
        else:
            attempt = _Attempt()
            # The request may outlive this attempt by the retry's wait and the retry itself.
            bound = 2 * self.timeout_s + self.summary_retry_delay_s
            task = asyncio.ensure_future(self._send_now(method, url, None, attempt, bound))
            self._in_flight[url] = (task, attempt)
            task.add_done_callback(lambda done: self._forget(url, done))
        try:
            async with asyncio.timeout(self.timeout_s):
                return await asyncio.shield(task)
        except TimeoutError as error:
            raise self._timed_out(attempt, method, url) from error

    def _timed_out(self, attempt: _Attempt, method: str, url: str) -> _Unavailable:
        if attempt.refused is not None:
            return _Unavailable(
                f"the release API could not be reached ({type(attempt.refused).__name__}) "
                f"for {self.timeout_s:g} seconds"
            )
        logger.warning("release API timed out", extra={"method": method, "url": url})
        return _Unavailable(f"the release API did not answer within {self.timeout_s:g} seconds")

    def _forget(self, url: str, done: asyncio.Future[_Reply]) -> None:
        if self._in_flight.get(url, (None,))[0] is done:
            del self._in_flight[url]
        if not done.cancelled():
            done.exception()  # retrieved: an attempt that gave up on it has said why already

    async def _send_now(
        self,
        method: str,
        url: str,
        payload: dict[str, Any] | None,
        attempt: _Attempt,
        bound_s: float,
    ) -> _Reply:
        try:
            async with asyncio.timeout(bound_s):
                delay = 0.1
                while True:
                    try:
                        response = await self._client.request(
                            method,
                            url,
                            json=payload,
                            headers=self._headers(),
                            timeout=bound_s,
                        )
                        break
                    except httpx.ConnectError as error:
                        if not self.reconnect:
                            raise
                        if attempt.refused is None:
                            logger.warning(
                                "release API unreachable: %s; trying again until %g s",
                                type(error).__name__,
                                self.timeout_s,
                                extra={"method": method, "url": url},
                            )
                        attempt.refused = error
                        await asyncio.sleep(delay)
                        delay = min(delay * 2, RECONNECT_DELAY_S)
        except (TimeoutError, httpx.TimeoutException) as error:
            raise self._timed_out(attempt, method, url) from error
        except httpx.HTTPError as error:
            logger.warning(
                "release API unreachable: %s",
                type(error).__name__,
                extra={"method": method, "url": url},
            )
            raise _Unavailable(
                f"the release API could not be reached ({type(error).__name__})"
            ) from error
        logger.debug(
            "release API answered %s",
            response.status_code,
            extra={"method": method, "url": url, "status": response.status_code},
        )
        return _Reply(response.status_code, response.reason_phrase, response.text)

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self._extra_headers is not None:
            try:
                headers.update(self._extra_headers())
            except Exception:
                # Trace propagation is a nicety; a broken hook must not break the tool.
                logger.warning("extra_headers hook failed", exc_info=True)
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        return headers

    def _quote(self, reply: _Reply) -> str:
        text = redact(reply.text.strip(), [self._token])
        if not text:
            return ""
        if len(text) > MAX_QUOTED_BODY_CHARS:
            text = text[:MAX_QUOTED_BODY_CHARS] + "..."
        return f" It said: {neutralise(text)}"


def register_release_tools(
    registry: ToolRegistry,
    base_url: str,
    *,
    token: str | None = None,
    release_id: str | None = None,
    client: httpx.AsyncClient | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    extra_headers: HeadersHook | None = None,
    with_summary: bool = True,
    brief_summary: bool = False,
) -> ReleaseTools:
    """Register the release tools; the caller closes the returned object when done."""
    release_tools = ReleaseTools(
        base_url,
        token=token,
        release_id=release_id,
        client=client,
        timeout_s=timeout_s,
        extra_headers=extra_headers,
        with_summary=with_summary,
        brief_summary=brief_summary,
    )
    release_tools.register(registry)
    return release_tools


def keyed_evidence(summary: Any) -> dict[str, str]:
    """The policy's evidence of a summary in the brief view, by key ({"E1": sentence}); empty
    for any other summary."""
    policy = summary.get("policy") if isinstance(summary, dict) else None
    evidence = policy.get("evidence") if isinstance(policy, dict) else None
    if not isinstance(evidence, dict):
        return {}
    return {str(key).upper(): str(text) for key, text in evidence.items()}


# For a summary the model asked of another release than the one under assessment (a typo in
# the id, say), the model may still correct itself.
NO_REPORT_WITHOUT_SUMMARY = (
    " Do not file a risk report without the summary: tell the user it could not be read, and why."
)
NO_REPORT_FILED = " No risk report was filed: a report must rest on the release's data."


def _no_summary(problem: str, *, error_type: str = ToolExecutionError.__name__) -> ToolOutcome:
    return ToolOutcome.failure(problem + NO_REPORT_WITHOUT_SUMMARY, error_type=error_type)


def _ends_the_run(failure: ToolOutcome) -> ToolOutcome:
    """The failure to read the assessed release's summary, as the run's last word.

    Without the summary there is nothing to assess. Measured on Qwen2.5-Coder-1.5B: told so,
    it still filed a report (refused), fetched again, filed again, up to the step limit, and
    never said what went wrong. So the run ends here, its answer the tool's own message."""
    problem = failure.content.removesuffix(NO_REPORT_WITHOUT_SUMMARY).rstrip()
    return ToolOutcome(
        content=problem + ("" if problem.endswith(".") else ".") + NO_REPORT_FILED,
        success=False,
        error_type=failure.error_type,
        terminal=True,
    )


def path_segment(value: str) -> str:
    # A release id is one path segment: "../admin" must not walk the API's URL space, and
    # a bare ".." would be resolved away by URL normalisation unless escaped.
    encoded = quote(value, safe="")
    return encoded.replace(".", "%2E") if set(value) == {"."} else encoded


def _error_text(text: str) -> str | None:
    try:
        body = json.loads(text)
    except ValueError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    return neutralise(error[:MAX_REFUSAL_CHARS]) if isinstance(error, str) else None


def _report_id(text: str) -> str | None:
    try:
        body = json.loads(text)
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    value = body.get("report_id", body.get("id"))
    return None if value is None else str(value)
