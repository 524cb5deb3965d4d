"""The agent's errors, in one tree.

```
AgentError
├── ConfigurationError          bad or missing settings (no provider, no key, unknown model)
├── ProviderError               a model call failed; carries status, body, request id
│   ├── AuthenticationError     401 / 403: the key is wrong or lacks access
│   ├── RateLimitError          429: carries retry_after (seconds) when the provider said
│   ├── ValidationError         400 / 422: the request itself is wrong
│   ├── NotFoundError           404: unknown model or endpoint (Ollama: model not pulled)
│   ├── ServerError             5xx, 408, 409, "overloaded"; retry_after when the server said
│   ├── NetworkError            the provider could not be reached, or the connection broke
│   │   └── ProviderTimeoutError
│   └── StreamError             a stream ended early or sent something unreadable
├── ToolError                   raised inside the registry, returned to the model as a result
│   ├── ToolNotFoundError
│   ├── InvalidArgumentsError
│   ├── ToolExecutionError
│   └── ToolTimeoutError
└── RunCancelledError           cooperative cancellation was requested
```

Each provider adapter translates httpx errors and HTTP statuses into this tree in one
place. Messages never contain API keys: adapters build them from status, body and request
id only, and `redact` scrubs known secrets from any text that leaves the process.
"""

from __future__ import annotations

from collections.abc import Iterable


class AgentError(Exception):
    """Base of every error the agent raises on purpose."""


class ConfigurationError(AgentError):
    pass


class RunLimitExceeded(AgentError):
    """The run passed one of its caps (events, streamed text, model output): it is stopped,
    and the message names the cap and the setting that raises it."""


class ProviderError(AgentError):
    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        status_code: int | None = None,
        body: str | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.status_code = status_code
        self.body = body
        self.request_id = request_id

    def __str__(self) -> str:
        parts = [self.message]
        if self.status_code is not None:
            parts.append(f"status {self.status_code}")
        if self.request_id:
            parts.append(f"request id {self.request_id}")
        return " | ".join(parts)


class AuthenticationError(ProviderError):
    pass


class RateLimitError(ProviderError):
    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: object):
        super().__init__(message, **kwargs)  # type: ignore[arg-type]
        self.retry_after = retry_after


class ValidationError(ProviderError):
    pass


class NotFoundError(ProviderError):
    pass


class ServerError(ProviderError):
    # Overloaded servers (503, Anthropic's 529) often say when to come back, too.
    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: object):
        super().__init__(message, **kwargs)  # type: ignore[arg-type]
        self.retry_after = retry_after


class NetworkError(ProviderError):
    pass


class ProviderTimeoutError(NetworkError):
    pass


class StreamError(ProviderError):
    pass


class ToolError(AgentError):
    pass


class ToolNotFoundError(ToolError):
    pass


class InvalidArgumentsError(ToolError):
    pass


class ToolExecutionError(ToolError):
    pass


class ToolTimeoutError(ToolError):
    pass


class RunCancelledError(AgentError):
    pass


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """Replace every known secret in `text` with a marker. Short values are left alone,
    since replacing a two-letter "key" would mangle ordinary words."""
    for secret in secrets:
        if secret and len(secret) >= 8:
            text = text.replace(secret, "[REDACTED]")
    return text
