"""What one agent run may do: `AgentConfig`, its limits and the messages the loop says itself.

Frozen data, read by `agent.loop.Agent` and the rules of `agent.run_state`; built from the
environment by `agent.config.AgentSettings`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from agent.messages import ToolCall
from agent.prompts import DEFAULT_SYSTEM_PROMPT
from agent.reasoning import REPORT_TOOL

# Said once when the model's answer was cut off at the output limit (finish reason "length"):
# the same request would be cut off the same way, at temperature 0 every time.
OUTPUT_LIMIT_MESSAGE = (
    "Your answer was cut off at the output limit ({max_tokens} tokens), so nothing was done. "
    "Write no text at all: call {report_tool} now, with short findings and no summary."
)

NUDGE_MESSAGE = (
    "You replied without calling a tool. Do not describe what you are going to do: "
    "call the tool you need now. Once you have the release summary, file the report "
    "with {report_tool}."
)


class AgentConfig(BaseModel):
    model_config = ConfigDict(frozen=True)

    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    max_steps: int = Field(default=8, ge=1)
    temperature: float | None = None
    max_tokens: int = Field(default=1024, ge=1)
    # False: one `complete()` call per model call, no deltas (for servers that cannot
    # stream tool calls).
    stream: bool = True
    # Filing the report ends the run; small models otherwise file again and again.
    end_on_report: bool = True
    max_text_only_nudges: int = Field(default=1, ge=0)
    # The run assesses a release (`build_agent` with a release_id): a text answer is nudged
    # even before any tool ran. Measured (issue 40): the default profile answered "214
    # failed tests" without calling a tool, and the run filed nothing.
    assessing: bool = False
    # A tool failing for the same reason (whatever the arguments) this many times in a row ends
    # the run: small models otherwise repeat it until the step limit (seen: filing for a
    # missing release seven times over).
    max_repeated_tool_failures: int = Field(default=3, ge=1)
    nudge_message: str = NUDGE_MESSAGE
    report_tool: str = REPORT_TOOL
    # An answer cut off at the output limit is asked for again this many times, with
    # `output_limit_message`; one more cut ends the run ("output_limit").
    max_output_limit_retries: int = Field(default=1, ge=0)
    output_limit_message: str = OUTPUT_LIMIT_MESSAGE
    # Streamed text is saved as TextDelta events of up to `delta_flush_chars` characters, at
    # most every `delta_flush_seconds`: not one event per chunk (a model streaming 10 MB in
    # 200-byte chunks made 50,000 events).
    delta_flush_chars: int = Field(default=2_000, ge=1)
    delta_flush_seconds: float = Field(default=0.25, ge=0)
    # Caps of one run, far above what an assessment uses (about 60 events and a few thousand
    # characters): past one, the run is stopped and fails saying which cap.
    max_events: int = Field(default=2_000, ge=10)
    max_text_chars: int = Field(default=200_000, ge=1)
    max_output_chars: int = Field(default=500_000, ge=1)
    # Run before the model's first step of a new conversation (agent/loop.py's docstring).
    opening_calls: tuple[ToolCall, ...] = ()


DEFAULT_CONFIG = AgentConfig()
