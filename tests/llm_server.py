"""A scripted LLM server on loopback, speaking OpenAI's Chat Completions streaming format.

For tests and demos that need a real model server over HTTP (a worker process, a browser
test, `manage.py up` by hand). Point the agent at it with

    DETECTIVE_PROVIDER=openai-compatible DETECTIVE_MODEL=scripted \
    DETECTIVE_BASE_URL=http://127.0.0.1:<port>/v1

and run `python -m tests.llm_server --port <port>` (see `--help`), or in a test:

    with ScriptedLLM(delay=0.05) as llm:
        ... llm.base_url ...

It plays a plausible assessment and is stateless, so concurrent runs can share it: the
answer depends only on the conversation in the request.

1. No release summary in the conversation yet: some words, then `get_release_summary` for the
   release named in the first user message ("Assess the risk of release <version>").
2. A summary (or its failure) is there: a short reading of it, then `file_risk_report` with a
   the severity floor of the risk policy the summary carries, and the policy's signals as
   findings, as a careful model would.
3. Anything after that: a closing sentence.

The bytes come from `agent.testing.wire.openai_sse`, sent one server-sent event at a time with
`delay` seconds between them, so a page can watch the text arrive. `narration` words are added
to the first reply (a longer, slower stream: for cancelling or reloading mid-run).
`mode="unauthorized"` answers 401 like a bad API key; `mode="rate-limited"` answers 429 every
time (with Retry-After: 0); `mode="retry-after-nan"` answers its first request 429 with
`Retry-After: nan`, then assesses; `mode="flood"` streams 10 MB of text in 200-byte
chunks. `mode="always-low"` files low whatever the data, and files the
same again when the policy refuses it; `mode="low-then-corrects"` files low first, then the
policy's severity after the refusal (the two ways a model can answer the risk policy).
`mode="investigate"` drills down after the summary, as the default profile's procedure asks:
`get_test_details` (failed tests), `get_code_changes`, `get_metric_history` (p95),
`get_observability_traces`, each when offered, then files the policy's severity with findings
that cite what they showed.
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from agent.messages import ToolCall
from agent.testing.fakes import reply
from agent.testing.wire import openai_sse

MODEL = "scripted-detective"
MODES = (
    "assess",
    "unauthorized",
    "rate-limited",
    "always-low",
    "low-then-corrects",
    "retry-after-nan",
    "flood",
    "investigate",
)
DRILL_DOWNS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("get_test_details", {"status": "failed", "limit": 10}),
    ("get_code_changes", {}),
    ("get_metric_history", {"metric": "response_time_p95"}),
    ("get_observability_traces", {}),
)
FLOOD_BYTES = 10 * 1024 * 1024
FLOOD_CHUNK = 200
_RELEASE = re.compile(r"release\s+(\S+)", re.IGNORECASE)


def release_in(messages: list[dict[str, Any]]) -> str:
    for message in messages:
        if message.get("role") == "user":
            found = _RELEASE.search(_text(message.get("content")))
            if found:
                return found.group(1).rstrip(".")
    return "unknown"


def _text(content: Any) -> str:
    if isinstance(content, list):  # content parts
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def _filings(messages: list[dict[str, Any]]) -> int:
    return sum(
        call.get("function", {}).get("name") == "file_risk_report"
        for message in messages
        for call in message.get("tool_calls") or []
    )


def _tool_results(messages: list[dict[str, Any]]) -> dict[str, str]:
    """Tool name -> the content of its (last) result."""
    names: dict[str, str] = {}
    for message in messages:
        for call in message.get("tool_calls") or []:
            names[call.get("id", "")] = call.get("function", {}).get("name", "")
    results = {}
    for message in messages:
        if message.get("role") == "tool":
            results[names.get(message.get("tool_call_id", ""), "")] = _text(message.get("content"))
    return results


def assess(summary_text: str) -> tuple[str, list[str], str]:
    """Severity, findings and a summary from what get_release_summary returned."""
    try:
        summary = json.loads(summary_text)
    except ValueError:
        return (
            "medium",
            ["The release summary was unavailable, so the risk could not be checked."],
            "Without the release data the risk is unknown; treat it as medium.",
        )
    policy = summary.get("policy") if isinstance(summary, dict) else None
    if not isinstance(policy, dict):
        return (
            "medium",
            ["The release summary carried no risk policy, so the risk could not be checked."],
            "Without the policy's signals the risk is unknown; treat it as medium.",
        )
    # A careful model: it files the policy's severity and restates the signals that raise
    # it, in the policy's own words (which cite the data's figures).
    severity = policy["severity_floor"]
    if "signals" not in policy:
        # The brief view (the small profile's): the evidence is all there is to copy.
        return severity, list(policy.get("evidence") or []), ""
    signals = policy.get("signals") or []
    findings = [s["detail"] for s in signals if s.get("level") in ("medium", "high")]
    if any("instructions" in str(s.get("detail")) for s in signals):
        findings.append("The release data contains instructions to the assessor; ignored.")
    if not findings:
        findings = [s["detail"] for s in signals] or ["No signal of risk in the release data."]
    return severity, findings, f"Overall the risk is {severity}."


def cited(results: dict[str, str]) -> list[str]:
    """What the drill-downs showed, as a careful model cites it: the first failing test, the
    first commit and the first error group as their lines in front say, the metric judge's
    sentence."""
    findings = []
    for name, line in (
        ("get_test_details", 1),
        ("get_code_changes", 3),
        ("get_observability_traces", 1),
    ):
        try:
            lines = json.loads(results[name])["in_short"]
        except (KeyError, ValueError, TypeError):
            continue
        if len(lines) > line:
            findings.append(lines[line])
    try:
        history = json.loads(results["get_metric_history"])
        findings.append(history["judgement_against_baseline"]["sentence"])
    except (KeyError, ValueError, TypeError):
        pass
    return findings


def _offered(body: dict[str, Any]) -> set[str]:
    return {
        str((tool.get("function") or {}).get("name"))
        for tool in body.get("tools") or []
        if isinstance(tool, dict)
    }


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        self.server.requests.append(body)
        mode = self.server.mode
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._json(404, {"error": {"message": f"no route {self.path}"}})
        elif mode == "unauthorized":
            self._json(401, {"error": {"message": "Incorrect API key provided: sk-te****"}})
        elif mode == "rate-limited":
            self._json(
                429,
                {"error": {"message": "Rate limit reached for requests"}},
                {"Retry-After": "0"},
            )
        elif mode == "flood":
            text = ("The model will not stop talking. " * (FLOOD_BYTES // 33 + 1))[:FLOOD_BYTES]
            self._stream(openai_sse(reply(text, model=MODEL), model=MODEL, chunk=FLOOD_CHUNK))
        elif mode == "retry-after-nan" and self.server.first_request():
            self._json(429, {"error": {"message": "Slow down"}}, {"Retry-After": "nan"})
        else:
            self._stream(self._turn(body.get("messages") or [], _offered(body)))

    def _turn(self, messages: list[dict[str, Any]], offered: set[str]) -> bytes:
        version = release_in(messages)
        results = _tool_results(messages)
        count = self.server.counter()
        drill = [
            (name, arguments)
            for name, arguments in DRILL_DOWNS
            if name in offered and name not in results
        ]
        if "get_release_summary" not in results:
            words = " ".join(f"step{n}" for n in range(self.server.narration))
            text = f"I will start by reading the summary of release {version}. {words}".strip()
            call = ToolCall(
                id=f"call_summary_{count}",
                name="get_release_summary",
                arguments={"release_id": version},
            )
            turn = reply(text, call, input_tokens=420, output_tokens=38, model=MODEL)
        elif self.server.mode == "investigate" and drill and "file_risk_report" not in results:
            name, arguments = drill[0]
            call = ToolCall(
                id=f"call_{name}_{count}", name=name, arguments={"release_id": version, **arguments}
            )
            turn = reply(f"Drilling down with {name}.", call, input_tokens=900, model=MODEL)
        elif "file_risk_report" not in results or (
            "was not filed" in results["file_risk_report"] and _filings(messages) < 2
        ):
            severity, findings, summary = assess(results["get_release_summary"])
            # Each once: a careful model does not file the policy's sentence a drill-down
            # repeated (a repeated finding is refused: issue 40).
            findings += [line for line in cited(results) if line not in findings]
            refused = "file_risk_report" in results
            mode = self.server.mode
            if mode == "always-low" or (mode == "low-then-corrects" and not refused):
                severity = "low"
            text = f"The summary of {version} is in. Filing a {severity} risk report."
            call = ToolCall(
                id=f"call_report_{count}",
                name="file_risk_report",
                arguments={
                    "release_id": version,
                    "severity": severity,
                    "findings": findings,
                    "summary": summary,
                },
            )
            turn = reply(text, call, input_tokens=780, output_tokens=96, model=MODEL)
        else:
            turn = reply("The assessment is complete.", input_tokens=900, output_tokens=8)
        return openai_sse(turn, model=MODEL, chunk=self.server.chunk)

    def _stream(self, data: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            for event in data.split(b"\n\n"):
                if not event.strip():
                    continue
                self.wfile.write(event + b"\n\n")
                self.wfile.flush()
                if self.server.delay:
                    time.sleep(self.server.delay)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away (a cancelled run)

    def _json(
        self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], *, mode: str, delay: float, chunk: int, narration: int
    ) -> None:
        super().__init__(address, _Handler)
        self.mode = mode
        self.delay = delay
        self.chunk = chunk
        self.narration = narration
        self.requests: list[dict[str, Any]] = []
        self._count = 0
        self._answered = False
        self._lock = threading.Lock()

    def first_request(self) -> bool:
        with self._lock:
            first, self._answered = not self._answered, True
            return first

    def counter(self) -> int:
        with self._lock:
            self._count += 1
            return self._count


class ScriptedLLM:
    """The server in a background thread; a context manager."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        mode: str = "assess",
        delay: float = 0.0,
        chunk: int = 12,
        narration: int = 0,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}")
        self._server = _Server(
            (host, port), mode=mode, delay=delay, chunk=chunk, narration=narration
        )
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self._server.requests

    def environment(self) -> dict[str, str]:
        """The variables that point the agent at this server."""
        return {
            "DETECTIVE_PROVIDER": "openai-compatible",
            "DETECTIVE_MODEL": MODEL,
            "DETECTIVE_BASE_URL": self.base_url,
        }

    def configure(
        self,
        *,
        mode: str | None = None,
        delay: float | None = None,
        narration: int | None = None,
    ) -> ScriptedLLM:
        """Answer differently from the next request on: processes started once with this
        server's address (a worker) serve several tests."""
        if mode is not None:
            if mode not in MODES:
                raise ValueError(f"mode must be one of {', '.join(MODES)}")
            self._server.mode = mode
        if delay is not None:
            self._server.delay = delay
        if narration is not None:
            self._server.narration = narration
        return self

    def start(self) -> ScriptedLLM:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> ScriptedLLM:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8011)
    parser.add_argument("--mode", choices=MODES, default="assess")
    parser.add_argument("--delay", type=float, default=0.05, help="seconds between events")
    parser.add_argument("--chunk", type=int, default=12, help="characters per text delta")
    parser.add_argument("--narration", type=int, default=40, help="extra words in reply 1")
    args = parser.parse_args()
    server = ScriptedLLM(
        args.host,
        args.port,
        mode=args.mode,
        delay=args.delay,
        chunk=args.chunk,
        narration=args.narration,
    )
    print(f"Scripted LLM at {server.base_url} ({args.mode}); Ctrl+C stops it.", flush=True)
    server.start()
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
