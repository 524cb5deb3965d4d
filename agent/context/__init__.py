"""Keeping the conversation inside the model's context window."""

from agent.context.budget import SAFETY_MARGIN, history_budget
from agent.context.limits import CONTEXT_WINDOWS, DEFAULT_CONTEXT_WINDOW, context_window_for
from agent.context.manager import WindowManager
from agent.context.protocol import ContextFit, ContextManager, HistoryProcessor
from agent.context.summarize import Summariser, summarization, summarize, summary_message
from agent.context.tokens import estimate_message_tokens, estimate_tokens
from agent.context.truncation import truncate, truncation

__all__ = [
    "CONTEXT_WINDOWS",
    "DEFAULT_CONTEXT_WINDOW",
    "SAFETY_MARGIN",
    "ContextFit",
    "ContextManager",
    "HistoryProcessor",
    "Summariser",
    "WindowManager",
    "context_window_for",
    "estimate_message_tokens",
    "estimate_tokens",
    "history_budget",
    "summarization",
    "summarize",
    "summary_message",
    "truncate",
    "truncation",
]
