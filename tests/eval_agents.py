"""Scripted agents for the eval tests: model doubles that answer each scenario of the suite
well, or badly in chosen ways, over OpenAI's Chat Completions streaming wire format.

A `ScriptedAgent` reads the conversation in each request (like a real model would), finds the
scenario by the release named in the first user message, and plays one of:

- **good**: reads the summary, then the drill-downs its scenario asks for before filing (those
  the request offers: the larger models' profile), then files the expected severity with
  findings that name every key risk (no figures) after the policy's evidence copied from the
  summary, or, when the summary cannot be had, says so plainly and files nothing;
- **reworded**: as good, in other words (another wording of each key risk and of the
  failure): an equally good agent;
- per-scenario **faults** (`faults={"scenario_id": "wrong_severity", ...}`):
  `wrong_severity` (high <-> low, medium -> low), `skip_summary` (files without reading),
  `invented_figure` (a finding quotes an error rate that is not in the data),
  `drops_evidence` (files its own findings without the policy's evidence: the model that
  makes the report say less than the policy),
  `provider_error` (the API answers 401, as with a bad key: the trial errors); and the
  sabotage check's (`SABOTAGE`): `one_lower` (one severity below the expected),
  `unknown_keys` (cites evidence keys E2 … E18 the summary never showed, as the local model
  did), `no_culprit` (leaves out every finding naming the culprit commit), `ignores_history`
  (leaves out what the history says, and files a history scenario low), `no_drill_down`
  (never calls a drill-down). Filing
  although the summary failed cannot be played: the release tools end the run first. A
  faulty agent insists: when the risk policy refuses its report, it files the same report
  once more (the API then keeps it for review).

A request without tools is the LLM judge's: it gets a fixed verdict (score 0.9).

Serve it with respx (`router.post(url).mock(side_effect=agent)`) or over loopback HTTP
(`with agent.serve() as base_url: ...`, or `python -m tests.eval_agents --port 8012`).
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from agent.messages import ToolCall
from agent.providers.protocol import ModelResponse
from agent.testing.fakes import reply
from agent.testing.wire import openai_sse
from evals.scenario import Scenario, Suite, load_suite

MODEL = "scripted-evals"
FAULTS = (
    "wrong_severity",
    "skip_summary",
    "invented_figure",
    "provider_error",
    "drops_evidence",
    "one_lower",
    "unknown_keys",
    "no_culprit",
    "ignores_history",
    "no_drill_down",
)
# The sabotaged agents of the sabotage check (issue 40, item 5), each a fault played on every
# scenario: the comparison with the good agent must fail for each.
SABOTAGE = (
    "drops_evidence",
    "one_lower",
    "unknown_keys",
    "no_culprit",
    "ignores_history",
    "no_drill_down",
)
_LOWER = {"high": "medium", "medium": "low", "low": "low"}
# A commit named by its short sha, as the suspects' sentences name the culprit.
_SHA_RE = re.compile(r"\b[0-9a-f]{7,12}\b")
# What the history says in the policy's sentences (and the suspects' drill-down).
_HISTORY_RE = re.compile(
    r"last \d+ releases?|first time|came back|fails again|baseline|times the|earlier release|"
    r"known flaky|history|Mann-Whitney|median of",
    re.IGNORECASE,
)
_RELEASE = re.compile(r"release\s+(\S+)", re.IGNORECASE)
_FLIP = {"high": "low", "medium": "low", "low": "high"}
# What the good agent asks a drill-down for, beside the release.
DRILL_DOWN_ARGUMENTS: dict[str, dict[str, Any]] = {
    "get_test_details": {"status": "failed"},
    "get_metric_history": {"metric": "response_time_p95"},
}


def _text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


class ScriptedAgent:
    """A stateless model double: the answer depends on the request alone, so any number of
    concurrent trials can share it."""

    def __init__(
        self,
        style: str = "good",
        *,
        faults: dict[str, str] | None = None,
        suite: Suite | None = None,
        delay: float = 0.0,
    ) -> None:
        if style not in ("good", "reworded"):
            raise ValueError("style is good or reworded")
        unknown = set((faults or {}).values()) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown faults: {', '.join(sorted(unknown))}")
        self.style = style
        self.faults = dict(faults or {})
        self.suite = suite or load_suite()
        self.by_release = {s.release_id: s for s in self.suite.scenarios}
        self.delay = delay
        self.calls = 0
        self._lock = threading.Lock()

    # -- the policy --

    def answer(self, body: dict[str, Any]) -> tuple[int, bytes, str]:
        """(status, body, content type) for one chat-completions request."""
        with self._lock:
            self.calls += 1
            n = self.calls
        messages = body.get("messages") or []
        if not body.get("tools"):
            # No tools on offer: the LLM judge asking for its verdict.
            verdict = json.dumps({"score": 0.9, "reasoning": "Sound reading of the evidence."})
            if body.get("stream"):
                return 200, openai_sse(reply(verdict), model=MODEL), "text/event-stream"
            completion = {
                "id": f"chatcmpl-judge-{n}",
                "object": "chat.completion",
                "model": MODEL,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": verdict},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 500, "completion_tokens": 20, "total_tokens": 520},
            }
            return 200, json.dumps(completion).encode(), "application/json"
        scenario = self._scenario(messages)
        fault = self.faults.get(scenario.id) if scenario else None
        if fault == "provider_error":
            error = {"error": {"message": "Incorrect API key provided", "type": "auth"}}
            return 401, json.dumps(error).encode(), "application/json"
        offered = {tool.get("function", {}).get("name") for tool in body.get("tools") or []} - {
            None
        }
        turn = self._turn(messages, scenario, fault, n, offered)
        return 200, openai_sse(turn, model=MODEL), "text/event-stream"

    def _scenario(self, messages: list[dict[str, Any]]) -> Scenario | None:
        for message in messages:
            if message.get("role") == "user":
                found = _RELEASE.search(_text(message.get("content")))
                if found:
                    return self.by_release.get(found.group(1).rstrip("."))
        return None

    def _turn(
        self,
        messages: list[dict[str, Any]],
        scenario: Scenario | None,
        fault: str | None,
        n: int,
        offered: set[str] | frozenset[str] = frozenset(),
    ) -> ModelResponse:
        if scenario is None:
            return reply("I cannot tell which release to assess.")
        results = _tool_results(messages)
        release = scenario.release_id
        _, filed_text = results.get("file_risk_report", (False, ""))
        refused = "not filed" in filed_text and _filings(messages) < 2
        if "file_risk_report" in results and not refused:
            return reply("The assessment is complete.", input_tokens=900, output_tokens=8)
        if "get_release_summary" not in results and fault != "skip_summary":
            call = ToolCall(
                id=f"call_s{n}", name="get_release_summary", arguments={"release_id": release}
            )
            return reply(f"Reading release {release}.", call, input_tokens=400, output_tokens=30)
        summary_ok, _ = results.get("get_release_summary", (True, ""))
        if not summary_ok:
            return reply(self._failure_text(scenario), input_tokens=600, output_tokens=40)
        for tool in scenario.expect.tools.must_call_before_filing:
            if (
                tool in offered
                and tool not in results
                and fault not in ("skip_summary", "no_drill_down")
            ):
                arguments = {"release_id": release, **DRILL_DOWN_ARGUMENTS.get(tool, {})}
                if tool == "get_metric_history" and "error-rate" in scenario.tags:
                    arguments["metric"] = "error_rate"
                if tool == "get_failure_suspects":
                    arguments["test"] = _first_failing(results["get_release_summary"][1])
                call = ToolCall(id=f"call_d{n}", name=tool, arguments=arguments)
                return reply(f"Looking closer: {tool}.", call, input_tokens=700, output_tokens=30)
        _, summary_text = results.get("get_release_summary", (True, ""))
        severity, findings, summary = self._report(scenario, fault, _evidence(summary_text))
        call = ToolCall(
            id=f"call_r{n}",
            name="file_risk_report",
            arguments={
                "release_id": release,
                "severity": severity,
                "findings": findings,
                "summary": summary,
            },
        )
        return reply(f"Filing a {severity} report.", call, input_tokens=800, output_tokens=90)

    def _wording(self, phrases: list[str]) -> str:
        if self.style == "reworded" and len(phrases) > 1:
            return phrases[1]
        return phrases[0]

    def _failure_text(self, scenario: Scenario) -> str:
        mention = scenario.expect.failure_mentions
        said = self._wording(mention.any_of) if mention else "unavailable"
        return (
            f"I could not assess release {scenario.release_id}: {said}. "
            "Without the release data I will not file a report or guess."
        )

    def _report(
        self, scenario: Scenario, fault: str | None, evidence: list[str] | None = None
    ) -> tuple[str, list[str], str]:
        expect = scenario.expect
        acceptable = sorted(expect.acceptable)
        severity = expect.severity or (acceptable[0] if acceptable else "medium")
        if fault == "wrong_severity":
            severity = _FLIP[severity]
        findings = [
            f"Risk: {self._wording(group.any_of)} needs attention." for group in expect.key_risks
        ] or ["Nothing of concern stands out in the changes, tests or metrics."]
        if fault != "drops_evidence":
            # A good agent keeps what the policy found, and adds its own reading.
            findings = [*(evidence or []), *findings]
        if fault == "invented_figure":
            findings.append("The error rate reached 42.7% in production.")
        if fault == "one_lower":
            severity = _LOWER[severity]
        if fault == "unknown_keys":
            findings += [f"E{n}" for n in range(2, 19)]
        if fault == "no_culprit" and expect.culprit:
            culprit = expect.culprit.lower()
            findings = [f for f in findings if culprit not in f.lower() and not _SHA_RE.search(f)]
        if fault == "ignores_history":
            findings = [f for f in findings if not _HISTORY_RE.search(f)]
            if "history" in scenario.tags:
                severity = "low"
        return severity, findings, f"Overall the risk is {severity}."

    # -- serving --

    def __call__(self, request: httpx.Request) -> httpx.Response:
        """A respx side effect."""
        status, body, content_type = self.answer(json.loads(request.content or b"{}"))
        return httpx.Response(status, content=body, headers={"content-type": content_type})

    @contextmanager
    def serve(self, port: int = 0) -> Iterator[str]:
        """Serve on loopback in a thread; yields the base URL (`.../v1`)."""
        server = _Server(("127.0.0.1", port), self)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}/v1"
        finally:
            server.shutdown()
            server.server_close()


def _filings(messages: list[dict[str, Any]]) -> int:
    return sum(
        1
        for message in messages
        for call in message.get("tool_calls") or []
        if call.get("function", {}).get("name") == "file_risk_report"
    )


def _evidence(summary: str) -> list[str]:
    """The policy's evidence in a release summary (a list, or by key in the brief view)."""
    try:
        data = json.loads(summary)
    except ValueError:
        return []
    policy = data.get("policy") if isinstance(data, dict) else None
    evidence = policy.get("evidence") if isinstance(policy, dict) else None
    if isinstance(evidence, dict):
        evidence = list(evidence.values())
    return [str(s) for s in evidence] if isinstance(evidence, list) else []


def _first_failing(summary: str) -> str:
    """The first failing test the summary names (what the suspects drill-down asks about)."""
    try:
        data = json.loads(summary)
    except ValueError:
        return "unknown"
    tests = data.get("tests") if isinstance(data, dict) else None
    failing = tests.get("failing_tests") if isinstance(tests, dict) else None
    return str(failing[0]) if isinstance(failing, list) and failing else "unknown"


def _tool_results(messages: list[dict[str, Any]]) -> dict[str, tuple[bool, str]]:
    """Tool name -> (succeeded, content) of its last result (the OpenAI wire marks a failed
    one "Error: ...")."""
    names: dict[str, str] = {}
    for message in messages:
        for call in message.get("tool_calls") or []:
            names[call.get("id", "")] = call.get("function", {}).get("name", "")
    results: dict[str, tuple[bool, str]] = {}
    for message in messages:
        if message.get("role") == "tool":
            content = _text(message.get("content"))
            ok = not content.startswith("Error:")
            results[names.get(message.get("tool_call_id", ""), "")] = (ok, content)
    return results


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        status, body, content_type = self.server.agent.answer(
            json.loads(self.rfile.read(length) or b"{}")
        )
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.server.agent.delay:
            time.sleep(self.server.agent.delay)
        self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], agent: ScriptedAgent) -> None:
        super().__init__(address, _Handler)
        self.agent = agent


def main() -> None:
    parser = argparse.ArgumentParser(description="A scripted eval agent on loopback.")
    parser.add_argument("--port", type=int, default=8012)
    parser.add_argument("--style", choices=("good", "reworded"), default="good")
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="SCENARIO=FAULT",
        help=f"make one scenario go wrong ({', '.join(FAULTS)}); repeatable",
    )
    parser.add_argument("--delay", type=float, default=0.0, help="seconds per model call")
    args = parser.parse_args()
    faults = dict(item.split("=", 1) for item in args.fault)
    agent = ScriptedAgent(args.style, faults=faults, delay=args.delay)
    with agent.serve(args.port) as url:
        print(
            f"Scripted eval agent ({args.style}) at {url}: DETECTIVE_PROVIDER=openai-compatible "
            f"DETECTIVE_MODEL={MODEL} DETECTIVE_BASE_URL={url}",
            flush=True,
        )
        with suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
