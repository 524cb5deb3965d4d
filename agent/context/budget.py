"""The spec's token budget for the conversation history.

    budget = context window - system prompt - reserved response - safety margin

The margin is 10% of the context window: a buffer for the estimates, which are exact only
up to the last request the provider counted. A budget is never negative; zero means not
even one message fits, and the context manager says so by keeping the last one anyway.
"""

from __future__ import annotations

import math

SAFETY_MARGIN = 0.10


def margin_tokens(context_window: int, margin: float = SAFETY_MARGIN) -> int:
    if not 0 <= margin < 1:
        raise ValueError(f"the margin is a fraction of the window in [0, 1), not {margin}")
    return math.ceil(context_window * margin)


def history_budget(
    context_window: int,
    system_tokens: int,
    response_tokens: int,
    margin: float = SAFETY_MARGIN,
) -> int:
    """Tokens left for the messages once everything else has been set aside."""
    if context_window <= 0:
        raise ValueError(f"a context window must be positive, not {context_window}")
    if system_tokens < 0 or response_tokens < 0:
        raise ValueError("token counts cannot be negative")
    available = (
        context_window - system_tokens - response_tokens - margin_tokens(context_window, margin)
    )
    return max(0, available)
