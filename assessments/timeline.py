"""A run's events as HTML: the whole timeline for the page, and fragments for live updates.

One set of partial templates (`templates/releases/_timeline.html`) renders every kind of
event. The run page renders the timeline folded from the saved events (`build`); the
websocket consumer sends the same items as htmx out-of-band swaps (`render_live`), for replay
and for live events alike:

- `model_request_started` opens a step (`#step-<n>`); its text deltas are appended to the
  step's text block (`#step-<n>-text`) as they stream, and `model_responded` replaces that
  block with the whole text of the response;
- a retry that threw away streamed text (`partial_discarded`) empties the step's text block;
- a tool call is a card (`#tool-<key>`) whose result fills in when it arrives;
- usage adds a line to the step and updates the run's totals (`#run-usage`);
- `run_started` sets the status and the model in the header (`#run-status`, `#run-model`);
- a terminal event closes the run: its outcome, and the status in the header (`#run-status`).

Every element an event puts on the page carries `data-seq`, so the page knows the last event
it has (the highest `data-seq`) and tells the consumer on (re)connection. Everything comes
from the model or the release data and is escaped by the templates; nothing is marked safe
except what the templates produced.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.template.loader import render_to_string

from releases.models import AgentEvent, RunStatus

TEMPLATE = "releases/_timeline.html"
MAX_VALUE_CHARS = 400
MAX_RESULT_CHARS = 4000
TERMINAL_KINDS = frozenset({"run_finished", "run_failed", "run_cancelled"})

# How each kind of provider failure reads on the page; the provider's own message follows.
_FAILURES = {
    "ConfigurationError": "Cannot start the agent",
    "AuthenticationError": "The model provider refused the credentials (check the API key)",
    "RateLimitError": "The model provider kept rate-limiting the requests, past every retry",
    "NetworkError": "The model provider could not be reached",
    "ProviderTimeoutError": "The model provider did not answer in time",
    "ServerError": "The model provider failed (a server error), past every retry",
    "NotFoundError": "The model provider does not know this model or endpoint",
    "ValidationError": "The model provider rejected the request",
    "StreamError": "The model provider's response broke off",
}


# ---- outcomes -------------------------------------------------------------------------------


def describe_failure(error_type: str, message: str) -> str:
    """A failure in plain words: what went wrong, then the provider's own message."""
    message = message.strip()
    lead = _FAILURES.get(error_type)
    if lead is None:
        return message or error_type or "The run failed"
    return f"{lead}: {message}" if message else f"{lead}."


def outcome(kind: str, payload: dict[str, Any]) -> tuple[str, str]:
    """The run status and error text a terminal event stands for."""
    if kind == "run_finished":
        if payload.get("reason") == "max_steps":
            steps = payload.get("steps") or "its"
            return RunStatus.FAILED, (
                f"The agent used all {steps} steps without filing a report or answering."
            )
        if payload.get("reason") == "output_limit":
            return RunStatus.FAILED, str(
                payload.get("final_text") or "The model's answer was cut off at the output limit."
            )
        if payload.get("reason") == "tool_failing":
            # No report, and a reason someone should look at (a missing release, a tool down).
            return RunStatus.FAILED, str(payload.get("final_text") or "A tool kept failing.")
        return RunStatus.SUCCEEDED, ""
    if kind == "run_cancelled":
        return RunStatus.CANCELLED, ""
    return RunStatus.FAILED, describe_failure(
        str(payload.get("error_type") or ""), str(payload.get("message") or "")
    )


# ---- the folded timeline (the page) ------------------------------------------------------------


@dataclass
class Step:
    number: int
    seq: int
    message_count: int = 0
    estimated_input_tokens: int = 0
    context_window: int = 0  # 0: not recorded (runs from before it was)
    text: str = ""
    text_seq: int = 0
    notes: list[dict[str, Any]] = field(default_factory=list)
    # The whole text's length when the page shows only its beginning ("show more").
    clipped_from: int = 0

    @property
    def context_percent(self) -> int | None:
        if not self.context_window:
            return None
        return round(self.estimated_input_tokens / self.context_window * 100)


@dataclass
class Item:
    """One entry of the timeline: which partial renders it, and with what."""

    partial: str
    seq: int
    context: dict[str, Any]

    def render(self) -> str:
        return render_to_string(f"{TEMPLATE}#{self.partial}", {"seq": self.seq, **self.context})


@dataclass
class Timeline:
    items: list[Item]
    usage: dict[str, Any] | None
    last_seq: int
    clipped: bool = False

    def __iter__(self) -> Any:
        return iter(self.items)


def build(events: Iterable[AgentEvent], text_limit: int | None = None) -> Timeline:
    """Fold a run's saved events into the timeline the page shows. With `text_limit`, a
    step's text longer than it shows its beginning only (the page offers the rest)."""
    items: list[Item] = []
    steps: dict[int, Step] = {}
    tools: dict[str, dict[str, Any]] = {}
    usage: dict[str, Any] | None = None
    current: Step | None = None
    last_seq = 0
    for event in events:
        seq, kind, payload = event.seq, event.kind, event.payload
        last_seq = seq
        if kind == "model_request_started":
            current = Step(
                number=int(payload.get("step") or 0),
                seq=seq,
                message_count=int(payload.get("message_count") or 0),
                estimated_input_tokens=int(payload.get("estimated_input_tokens") or 0),
                context_window=int(payload.get("context_window") or 0),
                text_seq=seq,
            )
            steps[current.number] = current
            items.append(Item("step", seq, {"step": current}))
        elif kind == "text_delta":
            step = steps.get(int(payload.get("step") or 0))
            if step is not None:
                step.text += str(payload.get("text") or "")
                step.text_seq = seq
        elif kind == "model_responded":
            step = steps.get(int(payload.get("step") or 0))
            if step is not None:
                step.text = str(payload.get("text") or "")
                step.text_seq = seq
                step.notes.append({"seq": seq, **_responded(payload)})
        elif kind == "usage":
            usage = _usage(seq, payload, usage["cost"] if usage else None)
            step = steps.get(int(payload.get("step") or 0))
            if step is not None:
                step.notes.append({"seq": seq, **_step_usage(payload)})
        elif kind == "tool_call":
            card = _tool_call(payload)
            tools[card["key"]] = card
            items.append(Item("tool", seq, {"tool": card}))
        elif kind == "tool_result":
            result = _tool_result(seq, payload)
            card = tools.get(result["key"])
            if card is not None:
                card["result"] = result
        elif kind == "retry_scheduled" and current is not None:
            # A retry belongs to the step it interrupted: drawn inside it, with its wait.
            if payload.get("partial_discarded"):
                current.text, current.text_seq = "", seq
            current.notes.append({"seq": seq, **_retry(payload)})
        else:
            items.append(_item(seq, kind, payload))
    clipped = False
    if text_limit is not None:
        for step in steps.values():
            if len(step.text) > text_limit:
                step.clipped_from, step.text = len(step.text), step.text[:text_limit]
                clipped = True
    return Timeline(items=items, usage=usage, last_seq=last_seq, clipped=clipped)


# ---- live fragments (the websocket) ------------------------------------------------------------


def render_live(events: Sequence[AgentEvent]) -> str:
    """The events as htmx out-of-band swaps, in order, ready to send over the websocket."""
    fragments = []
    for event in events:
        seq, kind, payload = event.seq, event.kind, event.payload
        if kind == "model_request_started":
            fragments.append(_append(build([event]).items[0].render()))
        elif kind == "text_delta":
            fragments.append(
                _oob(
                    "text_delta",
                    {"seq": seq, "step": payload.get("step"), "text": payload.get("text", "")},
                )
            )
        elif kind == "model_responded":
            number = payload.get("step")
            fragments.append(
                _oob(
                    "step_text",
                    {"seq": seq, "number": number, "text": payload.get("text", ""), "oob": True},
                )
            )
            fragments.append(
                _oob("step_note", {"number": number, "note": _responded(payload)}, seq)
            )
        elif kind == "usage":
            number = payload.get("step")
            fragments.append(
                _oob("step_note", {"number": number, "note": _step_usage(payload)}, seq)
            )
            usage = _usage(seq, payload, _cost_before(event))
            fragments.append(_oob("usage", {"usage": usage, "oob": True}, seq))
        elif kind == "tool_call":
            fragments.append(_append(Item("tool", seq, {"tool": _tool_call(payload)}).render()))
        elif kind == "tool_result":
            fragments.append(_oob("tool_result", {"result": _tool_result(seq, payload)}, seq))
        elif kind == "retry_scheduled" and (number := _current_step(event)) is not None:
            if payload.get("partial_discarded"):
                fragments.append(
                    _oob("step_text", {"seq": seq, "number": number, "text": "", "oob": True})
                )
            fragments.append(_oob("step_note", {"number": number, "note": _retry(payload)}, seq))
        else:
            fragments.append(_append(_item(seq, kind, payload).render()))
            if kind == "run_started":
                fragments.append(_oob("status", {"status": RunStatus.RUNNING, "oob": True}, seq))
                model = {"model": payload.get("model"), "provider": payload.get("provider")}
                fragments.append(_oob("model", {**model, "oob": True}, seq))
            if kind in TERMINAL_KINDS:
                status, _ = outcome(kind, payload)
                fragments.append(_oob("status", {"status": status, "oob": True}, seq))
                fragments.append(_oob("actions_done", {}, seq))
                # What only a finished run has (its report and verdict in the header, the
                # duration, the transcript, the trace) comes with the page's own body,
                # fetched once the run is recorded as ended (it is, before this is sent).
                fragments.append(_oob("refresh", {"run_id": event.conversation_id}, seq))
    return "".join(fragments)


def _append(html: str) -> str:
    return f'<div hx-swap-oob="beforeend:#run-timeline">{html}</div>'


def _oob(partial: str, context: dict[str, Any], seq: int | None = None) -> str:
    if seq is not None:
        context = {"seq": seq, **context}
    return render_to_string(f"{TEMPLATE}#{partial}", context)


def _current_step(event: AgentEvent) -> int | None:
    """The step a retry belongs to: the last one started before it."""
    payload = (
        AgentEvent.objects.filter(
            conversation_id=event.conversation_id,
            seq__lt=event.seq,
            kind="model_request_started",
        )
        .order_by("-seq")
        .values_list("payload", flat=True)
        .first()
    )
    return int(payload["step"]) if payload and "step" in payload else None


# ---- one event's view ----------------------------------------------------------------------


def _item(seq: int, kind: str, payload: dict[str, Any]) -> Item:
    if kind == "run_started":
        return Item("started", seq, {"event": payload})
    if kind == "context_trimmed":
        before, after = payload.get("messages_before", 0), payload.get("messages_after", 0)
        return Item(
            "trimmed",
            seq,
            {
                "event": payload,
                "dropped": max(0, int(before or 0) - int(after or 0)),
                "percent": round(float(payload.get("utilisation") or 0) * 100),
            },
        )
    if kind == "retry_scheduled":
        return Item("retry", seq, {"event": payload})
    if kind == "report_filed":
        return Item("report", seq, {"event": payload})
    if kind in TERMINAL_KINDS:
        status, error = outcome(kind, payload)
        return Item("ended", seq, {"event": payload, "status": status, "error": error})
    return Item("other", seq, {"kind": kind})


def _responded(payload: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "responded",
        "seconds": round(float(payload.get("duration_ms") or 0) / 1000, 1),
        "finish_reason": payload.get("finish_reason") or "",
        "tool_call_count": int(payload.get("tool_call_count") or 0),
    }


def _retry(payload: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "retry",
        "attempt": payload.get("attempt"),
        "max_attempts": payload.get("max_attempts"),
        "delay_s": float(payload.get("delay_s") or 0),
        "reason": str(payload.get("reason") or payload.get("error_type") or ""),
        "discarded": bool(payload.get("partial_discarded")),
    }


def _step_usage(payload: dict[str, Any]) -> dict[str, Any]:
    usage = payload.get("usage") or {}
    return {
        "kind": "usage",
        "input_tokens": int(usage.get("input_tokens") or 0),
        "output_tokens": int(usage.get("output_tokens") or 0),
        "cost": payload.get("estimated_cost_usd"),
    }


def _usage(seq: int, payload: dict[str, Any], cost_before: float | None) -> dict[str, Any]:
    """The run's totals after this usage event; the cost is the sum of the calls' estimates
    (None while no call had a known price)."""
    total = payload.get("total") or {}
    cost = payload.get("estimated_cost_usd")
    if cost is not None or cost_before is not None:
        cost = (cost_before or 0.0) + (cost or 0.0)
    return {
        "seq": seq,
        "input_tokens": int(total.get("input_tokens") or 0),
        "output_tokens": int(total.get("output_tokens") or 0),
        "cost": cost,
    }


def _cost_before(event: AgentEvent) -> float | None:
    """The estimated cost of the run's model calls before this one."""
    costs = [
        payload.get("estimated_cost_usd")
        for payload in AgentEvent.objects.filter(
            conversation_id=event.conversation_id, seq__lt=event.seq, kind="usage"
        ).values_list("payload", flat=True)
    ]
    known = [float(cost) for cost in costs if cost is not None]
    return sum(known) if known else None


def tool_key(step: Any, tool_call_id: Any) -> str:
    """A DOM id for a tool call: model-chosen ids are not safe to put in a selector."""
    return hashlib.sha1(f"{step}:{tool_call_id}".encode()).hexdigest()[:12]


def _tool_call(payload: dict[str, Any]) -> dict[str, Any]:
    call = payload.get("tool_call") or {}
    arguments = call.get("arguments") if isinstance(call.get("arguments"), dict) else {}
    return {
        "key": tool_key(payload.get("step"), call.get("id")),
        "name": str(call.get("name") or "?"),
        # Step 0: made for the model before its first step (agent/loop.py, opening calls).
        "opening": payload.get("step") == 0,
        # By name: PostgreSQL's jsonb does not keep the order the model wrote them in, and the
        # card must read the same live (from the event in memory) and after a reload.
        "arguments": [(str(name), _values(arguments[name])) for name in sorted(arguments)],
        "result": None,
    }


def _tool_result(seq: int, payload: dict[str, Any]) -> dict[str, Any]:
    result = payload.get("result") or {}
    content = str(result.get("content") or "")
    fields = None
    try:
        parsed = json.loads(content)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        fields = [(str(name), _values(value)) for name, value in parsed.items()]
    return {
        "seq": seq,
        "key": tool_key(payload.get("step"), result.get("tool_call_id")),
        "success": bool(result.get("success")),
        "error_type": result.get("error_type") or "",
        "seconds": round(float(result.get("duration_ms") or 0) / 1000, 2),
        "fields": fields,
        "text": None if fields is not None else _clip(content, MAX_RESULT_CHARS),
    }


def _values(value: Any) -> list[str]:
    """A value as short lines of text: a list item per line, anything else on one line."""
    if value is None:
        return []
    if isinstance(value, list):
        return [_clip(_text(item), MAX_VALUE_CHARS) for item in value]
    if isinstance(value, dict):
        return [
            _clip(f"{key}: {_text(item) if item is not None else 'missing'}", MAX_VALUE_CHARS)
            for key, item in value.items()
        ]
    return [_clip(_text(value), MAX_VALUE_CHARS)]


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
