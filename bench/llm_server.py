"""A scripted, zero-latency, OpenAI-compatible model server and release API, on loopback.

One real HTTP/1.1 server (asyncio, keep-alive, chunked streaming) answers:

- `POST <prefix>/v1/chat/completions`: the model. Plain JSON or server-sent events
  (`"stream": true`, built by `agent.testing.wire.openai_sse`). The script is stateless,
  so that any number of conversations can run at once: the reply depends on how many tool
  results the request carries (none: call `get_release_summary`; one: call
  `file_risk_report`; more: a final text answer).
- `GET /api/releases/<id>/summary` and `POST /api/risk-reports`: a tiny release API.

The URL prefix before `/v1` configures the model per base URL, so one server plays
several models: `/latency/300/v1` waits 300 ms before answering each call (a slow model);
`/drip/20/v1` streams its text as deltas 20 ms apart, each delta carrying the
`time.monotonic_ns()` at which it was written (`[t=...]`), for latency measurements (the
monotonic clock is system-wide on Linux, so another process can compare it with its own);
`/gate/<name>/...` holds each call until `POST /gates/<name>/open` (at most a minute), so
a benchmark can let a run start and get its watchers ready before the timed text flows.
Prefixes combine: `/gate/g1/drip/20/v1`. With `--api-upstream`, `/api/` requests are
forwarded there instead, as a TLS-terminating proxy would (`X-Forwarded-Proto: https`).

Run it in-process (`async with LoopbackServer() as server`) or as its own process
(`python -m bench.llm_server`, which prints `PORT <n>` once listening), so
that its work does not share the measured process's interpreter. It binds 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import re
import signal
import time
from dataclasses import dataclass
from typing import Any

import httpx

from agent.messages import Message, ToolCall, Usage
from agent.providers.protocol import ModelResponse
from agent.testing.wire import OPENAI_MODEL, openai_sse

HOST = "127.0.0.1"
MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 16 * 1024 * 1024
DEFAULT_RELEASE = "v2.1.0"
FINDINGS = ["2 failed tests alongside new payment processing", "error_rate 0.06 (6%)"]
OPENING = "I'll fetch the release summary first."
REASONING = "The error rate of 6% and failing tests make this high risk."
FINAL = "Filed: high risk, because of the failing payment tests and the 6% error rate."

_RELEASE_IN_TEXT = re.compile(r"\b(v\d+(?:\.\d+)+[\w.-]*)")
_PREFIX = re.compile(r"^/(latency|drip|gate)/(\w+)(?=/)")
GATE_TIMEOUT_S = 60.0


def summary_of(release_id: str) -> dict[str, Any]:
    return {
        "version": release_id,
        "title": "Payments",
        "changes": ["Added payment processing", "Fixed authentication bug"],
        "tests": {"passed": 142, "failed": 2, "skipped": 5},
        "deployment_metrics": {"error_rate": 0.06, "response_time_p95": 450},
    }


def release_of(messages: list[dict[str, Any]]) -> str:
    """The release under assessment: the first version-like word of a user message."""
    for message in messages:
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            found = _RELEASE_IN_TEXT.search(message["content"])
            if found:
                return found.group(1).rstrip(".")
    return DEFAULT_RELEASE


def turn_for(messages: list[dict[str, Any]]) -> ModelResponse:
    """The scripted reply to a conversation so far: summary, report, then a final answer."""
    results = sum(1 for m in messages if m.get("role") == "tool")
    release = release_of(messages)
    if results == 0:
        calls = [
            ToolCall(
                id="call_summary", name="get_release_summary", arguments={"release_id": release}
            )
        ]
        return _reply(OPENING, calls, 812, 31)
    if results == 1:
        arguments = {
            "release_id": release,
            "severity": "high",
            "findings": FINDINGS,
            "summary": "Error rate above 5% with failing tests.",
        }
        calls = [ToolCall(id="call_report", name="file_risk_report", arguments=arguments)]
        return _reply(REASONING, calls, 1204, 88)
    return _reply(FINAL, [], 1390, 24)


def _reply(text: str, calls: list[ToolCall], prompt: int, completion: int) -> ModelResponse:
    return ModelResponse(
        message=Message.assistant(text, calls),
        usage=Usage(input_tokens=prompt, output_tokens=completion),
        finish_reason="tool_calls" if calls else "stop",
        model=OPENAI_MODEL,
    )


def completion_json(turn: ModelResponse) -> dict[str, Any]:
    """The non-streaming Chat Completions body of a turn."""
    message: dict[str, Any] = {"role": "assistant", "content": turn.message.content or None}
    if turn.message.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": json.dumps(call.arguments, separators=(",", ":")),
                },
            }
            for call in turn.message.tool_calls
        ]
    usage = turn.usage
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": OPENAI_MODEL,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if turn.message.tool_calls else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens,
        },
    }


def _sse_chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": OPENAI_MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(body)}\n\n".encode()


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    target: str = ""  # the path with its query string


PROXIED_HEADERS = frozenset(
    {"authorization", "content-type", "accept", "traceparent", "tracestate"}
)


class HttpError(Exception):
    pass


async def read_request(reader: asyncio.StreamReader) -> Request | None:
    """One HTTP/1.1 request, or None when the client closed the connection."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as error:
        if error.partial.strip():
            raise HttpError("connection closed inside the request head") from None
        return None
    except asyncio.LimitOverrunError:
        raise HttpError("request head too large") from None
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, _version = lines[0].split(" ", 2)
    except ValueError:
        raise HttpError(f"bad request line {lines[0]!r}") from None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length") or 0)
    if length < 0 or length > MAX_BODY_BYTES:
        raise HttpError(f"bad content length {length}")
    body = await reader.readexactly(length) if length else b""
    return Request(method.upper(), target.split("?", 1)[0], headers, body, target)


def _head(status: int, reason: str, content_type: str, length: int | None) -> bytes:
    lines = [f"HTTP/1.1 {status} {reason}", f"content-type: {content_type}"]
    if length is None:
        lines.append("transfer-encoding: chunked")
    else:
        lines.append(f"content-length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


class LoopbackServer:
    """The server. `calls` counts model calls, `api_calls` release API calls."""

    def __init__(self, host: str = HOST, port: int = 0, *, api_upstream: str = "") -> None:
        if host not in ("127.0.0.1", "::1", "localhost"):
            raise ValueError("the benchmark server listens on loopback only")
        if api_upstream and not api_upstream.startswith(("http://127.0.0.1:", "http://localhost:")):
            raise ValueError("the release API upstream must be on loopback")
        self.host = host
        # Set: /api/ requests go there, as through a TLS-terminating proxy.
        self.api_upstream = api_upstream.rstrip("/")
        self._upstream: httpx.AsyncClient | None = None
        self.requested_port = port
        self.port = 0
        self.calls = 0
        self.api_calls = 0
        self._server: asyncio.Server | None = None
        self._reports = itertools.count(1)
        self._gates: dict[str, asyncio.Event] = {}
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> int:
        self._server = await asyncio.start_server(
            self._serve, self.host, self.requested_port, limit=MAX_HEADER_BYTES
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        if self._upstream is not None:
            await self._upstream.aclose()
            self._upstream = None
        if self._server is not None:
            self._server.close()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> LoopbackServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            while True:
                request = await read_request(reader)
                if request is None:
                    break
                await self._respond(request, writer)
                if request.headers.get("connection", "").lower() == "close":
                    break
        except (HttpError, ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            # Only `close()` cancels a connection: the server is going away.
            pass
        finally:
            if task is not None:
                self._connections.discard(task)
            writer.close()

    async def _respond(self, request: Request, writer: asyncio.StreamWriter) -> None:
        path = request.path
        options: dict[str, str] = {}
        while prefix := _PREFIX.match(path):
            options[prefix.group(1)] = prefix.group(2)
            path = path[prefix.end() :]
        latency_ms = int(options.get("latency", "0"))
        drip_ms = int(options["drip"]) if "drip" in options else None
        if request.method == "POST" and path.startswith("/gates/") and path.endswith("/open"):
            self._gate(path[len("/gates/") : -len("/open")]).set()
            self._json(writer, 200, {"open": True})
            await writer.drain()
            return
        if request.method == "POST" and path.endswith("/chat/completions"):
            self.calls += 1
            payload = json.loads(request.body or b"{}")
            if "gate" in options:
                await asyncio.wait_for(self._gate(options["gate"]).wait(), GATE_TIMEOUT_S)
            if latency_ms:
                await asyncio.sleep(latency_ms / 1000)
            turn = turn_for(payload.get("messages") or [])
            if not payload.get("stream"):
                self._json(writer, 200, completion_json(turn))
            elif drip_ms is not None:
                await self._drip(writer, turn, drip_ms / 1000)
            else:
                writer.write(_head(200, "OK", "text/event-stream", None))
                writer.write(_chunk(openai_sse(turn)) + _chunk(b""))
            await writer.drain()
            return
        self.api_calls += 1
        if self.api_upstream and path.startswith("/api/"):
            await self._proxy(request, writer)
            return
        if (
            request.method == "GET"
            and path.startswith("/api/releases/")
            and path.endswith("/summary")
        ):
            release = path[len("/api/releases/") : -len("/summary")]
            self._json(writer, 200, summary_of(release))
        elif request.method == "POST" and path == "/api/risk-reports":
            self._json(writer, 201, {"id": f"rep_{next(self._reports)}", "status": "filed"})
        else:
            self._json(writer, 404, {"error": f"no route for {request.method} {path}"})
        await writer.drain()

    def _gate(self, name: str) -> asyncio.Event:
        gate = self._gates.get(name)
        if gate is None:
            gate = self._gates[name] = asyncio.Event()
        return gate

    async def _proxy(self, request: Request, writer: asyncio.StreamWriter) -> None:
        if self._upstream is None:
            self._upstream = httpx.AsyncClient(timeout=30)
        headers = {
            name: value for name, value in request.headers.items() if name in PROXIED_HEADERS
        }
        headers["x-forwarded-proto"] = "https"
        response = await self._upstream.request(
            request.method,
            self.api_upstream + request.target,
            content=request.body,
            headers=headers,
        )
        content_type = response.headers.get("content-type", "application/json")
        body = response.content
        writer.write(_head(response.status_code, response.reason_phrase, content_type, len(body)))
        writer.write(body)
        await writer.drain()

    def _json(self, writer: asyncio.StreamWriter, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        reason = {200: "OK", 201: "Created", 404: "Not Found"}.get(status, "OK")
        writer.write(_head(status, reason, "application/json", len(data)) + data)

    async def _drip(self, writer: asyncio.StreamWriter, turn: ModelResponse, gap_s: float) -> None:
        """Stream the turn with its text as timestamped deltas `gap_s` apart."""
        writer.write(_head(200, "OK", "text/event-stream", None))
        writer.write(_chunk(_sse_chunk({"role": "assistant", "content": ""})))
        await writer.drain()
        for word in turn.message.content.split(" ")[:DRIP_MAX_DELTAS]:
            await asyncio.sleep(gap_s)
            text = f"{word} [t={time.monotonic_ns()}] "
            writer.write(_chunk(_sse_chunk({"content": text})))
            await writer.drain()
        rest = openai_sse(
            turn.model_copy(update={"message": turn.message.model_copy(update={"content": ""})})
        )
        # The opening role chunk was sent already; the rest carries calls, finish, usage.
        writer.write(_chunk(rest.split(b"\n\n", 1)[1]) + _chunk(b""))


DRIP_MAX_DELTAS = 64
_TIMESTAMP = re.compile(r"\[t=(\d+)\]")


def timestamps_in(text: str) -> list[int]:
    """The emission times (monotonic ns) of the drip deltas found in `text`."""
    return [int(found) for found in _TIMESTAMP.findall(text)]


async def _main(port: int, api_upstream: str) -> None:
    server = LoopbackServer(port=port, api_upstream=api_upstream)
    await server.start()
    print(f"PORT {server.port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    await server.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument(
        "--api-upstream", default="", help="Proxy /api/ to this loopback URL (as https)."
    )
    args = parser.parse_args(argv)
    asyncio.run(_main(args.port, args.api_upstream))


if __name__ == "__main__":
    main()
