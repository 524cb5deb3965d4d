"""Detective's agent core: plain Python, no Django.

The Django side reaches it only through its seams, `assessments/runner/` and `evals/runner/`.
The public names are listed in `__all__` and loaded on first use, so that importing one
small module (`agent.errors`, say) does not pull in the providers and OpenTelemetry.

```python
from agent import AgentSettings, JsonFileStore, build_agent

agent = build_agent(AgentSettings(), release_id="v2.1.0", store=JsonFileStore("data/conversations"))
async for event in agent.send_message("Assess the risk of release v2.1.0"):
    ...
```
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# public name -> the module that defines it
_EXPORTS = {
    # composing an agent
    "AgentSettings": "agent.config",
    "build_agent": "agent.config",
    # the loop
    "Agent": "agent.loop",
    "AgentConfig": "agent.run_config",
    "ConversationContext": "agent.loop",
    "CancelToken": "agent.cancel",
    # reasoning and prompts
    "ReasoningStrategy": "agent.reasoning",
    "DirectStrategy": "agent.reasoning",
    "SelfCheckStrategy": "agent.reasoning",
    "PlanThenInvestigate": "agent.reasoning",
    "get_strategy": "agent.reasoning",
    "DEFAULT_SYSTEM_PROMPT": "agent.prompts",
    "PromptProfile": "agent.prompts",
    "profile_for": "agent.prompts",
    # stores
    "ConversationStore": "agent.store",
    "ConversationSummary": "agent.store",
    "ConversationNotFoundError": "agent.store",
    "StoredEvent": "agent.store",
    "JsonFileStore": "agent.store",
    "InMemoryStore": "agent.store",
    # data
    "Conversation": "agent.messages",
    "Message": "agent.messages",
    "ToolCall": "agent.messages",
    "ToolResult": "agent.messages",
    "ToolDefinition": "agent.messages",
    "Usage": "agent.messages",
    "AgentEvent": "agent.events",
    "parse_event": "agent.events",
    "dump_event": "agent.events",
    # protocols
    "Provider": "agent.providers.protocol",
    "ToolExecutor": "agent.tools.protocol",
    "ContextManager": "agent.context.protocol",
    # errors
    "AgentError": "agent.errors",
    "ConfigurationError": "agent.errors",
    "ProviderError": "agent.errors",
}

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "Agent",
    "AgentConfig",
    "AgentError",
    "AgentEvent",
    "AgentSettings",
    "CancelToken",
    "ConfigurationError",
    "ContextManager",
    "Conversation",
    "ConversationContext",
    "ConversationNotFoundError",
    "ConversationStore",
    "ConversationSummary",
    "DirectStrategy",
    "InMemoryStore",
    "JsonFileStore",
    "Message",
    "PlanThenInvestigate",
    "PromptProfile",
    "Provider",
    "ProviderError",
    "ReasoningStrategy",
    "SelfCheckStrategy",
    "StoredEvent",
    "ToolCall",
    "ToolDefinition",
    "ToolExecutor",
    "ToolResult",
    "Usage",
    "build_agent",
    "dump_event",
    "get_strategy",
    "parse_event",
    "profile_for",
]

if TYPE_CHECKING:
    from agent.cancel import CancelToken
    from agent.config import AgentSettings, build_agent
    from agent.context.protocol import ContextManager
    from agent.errors import AgentError, ConfigurationError, ProviderError
    from agent.events import AgentEvent, dump_event, parse_event
    from agent.loop import Agent, ConversationContext
    from agent.messages import Conversation, Message, ToolCall, ToolDefinition, ToolResult, Usage
    from agent.prompts import DEFAULT_SYSTEM_PROMPT, PromptProfile, profile_for
    from agent.providers.protocol import Provider
    from agent.reasoning import (
        DirectStrategy,
        PlanThenInvestigate,
        ReasoningStrategy,
        SelfCheckStrategy,
        get_strategy,
    )
    from agent.run_config import AgentConfig
    from agent.store import (
        ConversationNotFoundError,
        ConversationStore,
        ConversationSummary,
        InMemoryStore,
        JsonFileStore,
        StoredEvent,
    )
    from agent.tools.protocol import ToolExecutor


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agent' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
