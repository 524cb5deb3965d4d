"""Live progress of eval runs: what is sent to the group `evalrun-<id>` after each trial,
and the websocket consumer the evals pages connect to.

The message is the progress bar's HTML, swapped in by id (htmx's ws extension), so a page
shows what the database says at the moment of sending; on connect the consumer sends the
current state first, so a page that connects late or reconnects is never behind.
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.http import Http404
from django.template.loader import render_to_string

from evals import selectors

MESSAGE_TYPE = "evalrun.progress"
VIEW_PERMISSION = "evals.view_evalrun"
GROUP_PREFIX = "evalrun-"


def run_group(run_id: int) -> str:
    """The channel group of a run's pages: the services send to it, the consumer joins it."""
    return f"{GROUP_PREFIX}{run_id}"


def render_progress(progress: selectors.Progress) -> str:
    return render_to_string("evals/_progress.html#bar", {"progress": progress, "oob": True})


def progress_message(run_id: int) -> dict[str, Any]:
    return {"type": MESSAGE_TYPE, "html": render_progress(selectors.progress(run_id))}


def can_watch(user: Any) -> bool:
    return bool(
        user is not None
        and user.is_authenticated
        and user.is_active
        and user.has_perm(VIEW_PERMISSION)  # the staff flag alone grants nothing
    )


class EvalRunConsumer(AsyncWebsocketConsumer):
    """`ws/evals/runs/<pk>/`: the run's progress now, then after every trial, for a user who
    may see eval runs. Close codes as the run page's: 4401 not logged in, 4403 not allowed,
    4404 no such run. The origin is checked before this (AllowedHostsOriginValidator)."""

    group: str = ""

    async def connect(self) -> None:
        user = self.scope.get("user")
        pk = self.scope["url_route"]["kwargs"]["pk"]
        # Accept first, so that the page can tell a refusal (close code) from a network error.
        await self.accept()
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        if not await database_sync_to_async(can_watch)(user):
            await self.close(code=4403)
            return
        self.group = run_group(pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        # Joined before reading: a trial recorded in between is sent again, never missed.
        try:
            html = await database_sync_to_async(_current)(pk)
        except Http404:
            await self.close(code=4404)
            return
        await self.send(text_data=html)

    async def disconnect(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def evalrun_progress(self, message: dict[str, Any]) -> None:
        await self.send(text_data=message["html"])


def _current(pk: int) -> str:
    return render_progress(selectors.progress(pk))
