"""The HTTP contract with Detective's ingestion and verdict API, in httpx.

Every call carries `Authorization: Bearer <token>`. A refusal from the server becomes an
`ApiError` with the status and the server's own reason (its JSON `error`, and any details it
sent); a server that cannot be reached becomes `Unreachable`. Nothing here decides what a
pipeline does with them: that is `cli`'s job.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

import httpx

from detective_client import __version__
from detective_client.records import CommitRecord, HeadRecord

USER_AGENT = f"detective-client/{__version__}"
JUNIT_TYPE = "application/xml"
METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class ClientError(Exception):
    """Anything that stops the client; the message is what the pipeline log shows."""


class Unreachable(ClientError):
    pass


class ApiError(ClientError):
    def __init__(self, method: str, url: str, status: int, reason: str) -> None:
        super().__init__(f"{method} {url} answered {status}: {reason}")
        self.status = status
        self.reason = reason


def reason_of(response: httpx.Response) -> str:
    """The server's reason for a refusal: its JSON `error` and the details beside it, else the
    start of the body, else the status phrase."""
    try:
        body = response.json()
    except ValueError:
        text = response.text.strip()
        return text[:500] if text else response.reason_phrase
    if isinstance(body, dict) and "error" in body:
        details = {key: value for key, value in body.items() if key != "error"}
        extra = f" ({json.dumps(details, ensure_ascii=False)})" if details else ""
        return f"{body['error']}{extra}"
    return json.dumps(body, ensure_ascii=False)[:500]


def commits_body(commits: Sequence[CommitRecord], head: HeadRecord | None) -> dict[str, Any]:
    """`{"commits": [...]}`, with `"head"` when the head's facts were read (a server before
    them ignores the field)."""
    body: dict[str, Any] = {"commits": [commit.to_json() for commit in commits]}
    if head is not None:
        body["head"] = head.to_json()
    return body


class DetectiveApi:
    """One server, one token. Use as a context manager (it owns its connection pool)."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not base_url:
            raise ClientError("no server: set DETECTIVE_URL (or pass --url)")
        if not token:
            raise ClientError("no token: set DETECTIVE_TOKEN to an ingestion token")
        self.client = httpx.Client(
            base_url=base_url.rstrip("/") + "/",
            headers={"Authorization": f"Bearer {token}", "User-Agent": USER_AGENT},
            timeout=timeout,
            transport=transport or httpx.HTTPTransport(retries=2),
        )

    def __enter__(self) -> DetectiveApi:
        return self

    def __exit__(self, *_: object) -> None:
        self.client.close()

    def _send(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self.client.request(method, path, **kwargs)
        except httpx.TimeoutException:
            raise Unreachable(f"{method} {self.client.base_url}{path}: no answer in time") from None
        except httpx.TransportError as error:
            raise Unreachable(
                f"cannot reach Detective at {self.client.base_url}: {error or type(error).__name__}"
            ) from None
        if response.status_code >= 400:
            raise ApiError(method, path, response.status_code, reason_of(response))
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise ApiError(method, path, response.status_code, "the answer is not JSON") from None

    @staticmethod
    def _release(version: str) -> str:
        return f"api/releases/{quote(version, safe='')}"

    def put_release(self, release: dict[str, Any]) -> Any:
        """Create or update the release (idempotent by service and version)."""
        return self._send("POST", "api/releases", json=release)

    def send_commits(
        self,
        service: str,
        version: str,
        commits: Sequence[CommitRecord],
        head: HeadRecord | None = None,
    ) -> Any:
        body = commits_body(commits, head)
        return self._send(
            "POST", f"{self._release(version)}/commits", params={"service": service}, json=body
        )

    def send_junit(self, service: str, version: str, filename: str, xml: bytes) -> Any:
        return self._send(
            "POST",
            f"{self._release(version)}/junit",
            params={"service": service, "filename": filename},
            content=xml,
            headers={"Content-Type": JUNIT_TYPE},
        )

    def send_metrics(self, service: str, version: str, filename: str, text: bytes) -> Any:
        return self._send(
            "POST",
            f"{self._release(version)}/metrics",
            params={"service": service, "filename": filename},
            content=text,
            headers={"Content-Type": METRICS_TYPE},
        )

    def assess(self, service: str, version: str) -> Any:
        """Queue the release's assessment (the one already queued or running, if any)."""
        return self._send("POST", f"{self._release(version)}/assess", params={"service": service})

    def verdict(self, service: str, version: str) -> dict[str, Any]:
        answer = self._send("GET", f"{self._release(version)}/verdict", params={"service": service})
        if not isinstance(answer, dict) or "state" not in answer:
            raise ClientError(f"the verdict of {version} is not a verdict: {answer!r:.200}")
        return answer

    def waiting(self, service: str, version: str) -> dict[str, Any]:
        """Say this job waits for a person's decision; the verdict, with `review_url`."""
        answer = self._send(
            "POST", f"{self._release(version)}/waiting", params={"service": service}
        )
        if not isinstance(answer, dict) or "state" not in answer:
            raise ClientError(f"the verdict of {version} is not a verdict: {answer!r:.200}")
        return answer

    def send_bundle(
        self,
        release: dict[str, Any],
        commits: Sequence[CommitRecord],
        junit: Sequence[tuple[str, bytes]],
        metrics: tuple[str, bytes] | None,
        *,
        head: HeadRecord | None = None,
    ) -> dict[str, Any]:
        """The release and all its sources in one request, which the server stores whole or
        not at all (`POST /api/releases/bundle`)."""
        data = {"release": json.dumps(release, ensure_ascii=False)}
        files: list[tuple[str, tuple[str, bytes, str]]] = [
            ("junit", (name, xml, JUNIT_TYPE)) for name, xml in junit
        ]
        if commits:
            # A file part: the server holds form fields, not files, to a size in memory.
            body = json.dumps(commits_body(commits, head)).encode()
            files.append(("commits", ("commits.json", body, "application/json")))
        if metrics is not None:
            files.append(("metrics", (metrics[0], metrics[1], METRICS_TYPE)))
        answer = self._send("POST", "api/releases/bundle", data=data, files=files or None)
        if not isinstance(answer, dict):
            raise ClientError(f"the bundle's answer is not JSON: {answer!r:.200}")
        return answer
