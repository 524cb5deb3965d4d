"""Hand-written transcripts for the evaluators' tests (`evals/testdata/*.json`: a scenario, a
transcript, and what its author says the evaluators must find), and transcripts built from a
list of tool calls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent.messages import Message, ToolCall, ToolResult
from evals.runner.transcript import Transcript

TESTDATA = Path(__file__).resolve().parents[1] / "evals" / "testdata"
CASES = sorted(TESTDATA.glob("*.json"))


def case(path: Path) -> tuple[dict[str, Any], Transcript]:
    data = json.loads(path.read_text())
    return data, Transcript.model_validate(data["transcript"])


def tool_run(
    prompt: str, *steps: tuple[str, dict[str, Any], str, bool], final: str = ""
) -> Transcript:
    """A transcript of these tool calls (name, arguments, result, succeeded), then `final`."""
    messages = [Message.user(prompt)]
    for i, (name, args, content, ok) in enumerate(steps):
        call = ToolCall(id=f"c{i}", name=name, arguments=args)
        messages.append(Message.assistant(tool_calls=[call]))
        messages.append(
            Message.tool(ToolResult(tool_call_id=call.id, name=name, content=content, success=ok))
        )
    if final:
        messages.append(Message.assistant(final))
    return Transcript(messages=messages)
