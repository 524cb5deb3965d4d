"""A local HTTP double of Detective's ingestion and verdict API, speaking the contract the
client is written to (and that `tests/client_site_test.py` checks against the real site):

- POST /api/releases/bundle     multipart: release, commits (JSON), junit and metrics files
- POST /api/releases                                   JSON {service, version, ...}
- POST /api/releases/<version>/commits?service=S       JSON {"commits": [...]}
- POST /api/releases/<version>/junit?service=S&filename=F   the XML as the body
- POST /api/releases/<version>/metrics?service=S       OpenMetrics text
- POST /api/releases/<version>/assess?service=S        (no body): queue the assessment
- GET  /api/releases/<version>/verdict?service=S       the verdict JSON
- POST /api/releases/<version>/waiting?service=S       a job waits for a decision: the verdict
                                                        JSON and its review_url

Every call needs `Authorization: Bearer <TOKEN>`; a refusal is JSON {"error": ...}.
"""

from __future__ import annotations

import email.policy
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from detective_client.records import CommitRecord, RecordError

TOKEN = "dtk_test_token"


@dataclass
class Received:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes


@dataclass
class Double:
    url: str = ""
    received: list[Received] = field(default_factory=list)
    releases: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    # Answers to GET .../verdict, in turn; the last one repeats.
    verdicts: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    # (method, path suffix) -> (status, body) to refuse with.
    refuse: dict[tuple[str, str], tuple[int, dict[str, Any]]] = field(default_factory=dict)
    # Each POST /api/releases/bundle, its fields: name -> [(file name, content)].
    bundles: list[dict[str, list[tuple[str, bytes]]]] = field(default_factory=list)

    def paths(self) -> list[str]:
        return [f"{r.method} {r.path}" for r in self.received]


def multipart(content_type: str, body: bytes) -> dict[str, list[tuple[str, bytes]]]:
    """A form's body (multipart, or urlencoded when it has no file): each field's (file
    name, content), by field name."""
    if not content_type.startswith("multipart/"):
        return {
            name: [("", value.encode()) for value in values]
            for name, values in parse_qs(body.decode()).items()
        }
    message = BytesParser(policy=email.policy.default).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body
    )
    fields: dict[str, list[tuple[str, bytes]]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        fields.setdefault(str(name), []).append((part.get_filename() or "", payload or b""))
    return fields


def _handler(double: Double) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: Any) -> None:
            pass

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _handle(self) -> None:
            parts = urlsplit(self.path)
            query = {key: values[0] for key, values in parse_qs(parts.query).items()}
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            received = Received(
                self.command, unquote(parts.path), query, dict(self.headers.items()), body
            )
            double.received.append(received)
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return self._answer(401, {"error": "a valid ingestion token is required"})
            for (method, suffix), (status, answer) in double.refuse.items():
                if method == self.command and received.path.endswith(suffix):
                    return self._answer(status, answer)
            self._route(received)

        def _route(self, got: Received) -> None:
            segments = got.path.strip("/").split("/")
            if got.method == "POST" and segments == ["api", "releases", "bundle"]:
                return self._bundle(got)
            if got.method == "POST" and segments == ["api", "releases"]:
                release = json.loads(got.body)
                if not release.get("service") or not release.get("version"):
                    return self._answer(400, {"error": "service and version are required"})
                double.releases[(release["service"], release["version"])] = release
                return self._answer(200, {"created": True, **release})
            if len(segments) != 4 or segments[:2] != ["api", "releases"]:
                return self._answer(404, {"error": "no such address"})
            version, what = segments[2], segments[3]
            key = (got.query.get("service", ""), version)
            if (got.method, what) in (("GET", "verdict"), ("POST", "waiting")):
                if key not in double.releases or not double.verdicts:
                    return self._answer(404, {"error": f"no release {key[1]} of {key[0]!r}"})
                status, answer = (
                    double.verdicts.pop(0) if len(double.verdicts) > 1 else double.verdicts[0]
                )
                if what == "waiting":
                    answer = {**answer, "review_url": f"{double.url}/review/#queue-item-1"}
                return self._answer(status, answer)
            if key not in double.releases:
                return self._answer(404, {"error": f"no release {key[1]} of {key[0]!r}"})
            if what == "commits":
                try:
                    commits = [
                        CommitRecord.from_json(value, f"commits[{n}]")
                        for n, value in enumerate(json.loads(got.body)["commits"])
                    ]
                except RecordError as error:
                    return self._answer(400, {"error": str(error)})
                return self._answer(200, {"commits": len(commits)})
            if what == "junit":
                if not got.query.get("filename"):
                    return self._answer(400, {"error": "filename is required"})
                return self._answer(200, {"file": got.query["filename"], "bytes": len(got.body)})
            if what == "assess" and got.method == "POST":
                return self._answer(202, {"run": "r1", "status": "queued", "url": "/runs/r1/"})
            if what == "metrics":
                return self._answer(200, {"bytes": len(got.body)})
            return self._answer(404, {"error": "no such address"})

        def _bundle(self, got: Received) -> None:
            parts = multipart(got.headers.get("Content-Type", ""), got.body)
            double.bundles.append(parts)
            release = json.loads(parts["release"][0][1])
            double.releases[(release["service"], release["version"])] = release
            stored = [
                {"kind": kind, "name": name, "created": True, "counts": {}}
                for kind in ("junit", "metrics")
                for name, _ in parts.get(kind, [])
            ]
            return self._answer(201, {"stored": "all", "created": True, "parts": stored})

        do_GET = _handle
        do_POST = _handle

    return Handler


@pytest.fixture
def double() -> Iterator[Double]:
    state = Double()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
