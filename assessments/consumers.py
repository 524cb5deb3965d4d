"""The run page's websocket: authenticate, replay what the page missed, relay live events.

`ws/runs/<id>/`. The consumer subscribes to the run's group (`run-<id>`, through the process's
one membership: `assessments.fanout`) before anything else, so no event published from then on is
missed; the page then says which event it shows last
(`{"last_seq": N}`, sent on every (re)connection), and the consumer sends the saved events
after N, then the live ones. It tracks the last number it sent: a live event it already sent
is skipped, and one that arrives ahead of a gap (the channel layer does not promise order or
delivery) brings the missing ones from the database first. So a page that reloads or loses
its connection mid-run ends up with every event exactly once. Events arrive rendered
(`assessments.timeline`), as htmx out-of-band swaps.

A gap shows only when a later event comes, so a lost last event (the run's end) would leave
the page open and waiting for ever: after `QUIET_RECHECK_S` without a live event, the
consumer reads the saved events after its last one again.

The channel layer may be down (Redis stopped): the database still has every event, so the
page stays connected and reads them from there, every `POLL_S`, for as long as its
subscription is not live; when the layer is back the subscription says so (`LIVE_AGAIN`) and
the consumer reads what went by meanwhile, then relays live events again. The consumer has
no channel of its own on the layer (live events come through the fan-out), so a layer that
fails cannot end the page's socket either.

Close codes: 4401 not logged in, 4403 not allowed to see the run, 4404 no such run. The
origin is checked before this (AllowedHostsOriginValidator in asgi.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.db import InterfaceError, OperationalError

from assessments import selectors, services
from assessments.fanout import LIVE_AGAIN, Subscription, fanout
from assessments.layer_health import describe
from assessments.timeline import TERMINAL_KINDS, render_live
from releases.models import AgentEvent

logger = logging.getLogger(__name__)

# A replay is sent in pieces of this many events (one websocket message each).
REPLAY_BATCH = 200
# With no live event for this long, look in the database for events the layer lost.
QUIET_RECHECK_S = 3.0
# While the layer is down, read the database this often.
POLL_S = 1.0
# Channels gives a consumer a channel of its own on the layer named by its alias; no layer has
# this name, so this consumer gets none (see the module's docstring).
NO_CHANNEL_LAYER = "run-pages-have-no-channel-of-their-own"


class RunConsumer(AsyncWebsocketConsumer):
    channel_layer_alias = NO_CHANNEL_LAYER
    run_id: str
    run_over: bool
    group: str
    last_sent: int | None
    ended: bool
    last_live: float
    subscription: Subscription | None
    recheck: asyncio.Task[None] | None

    async def connect(self) -> None:
        self.run_over = False
        self.last_sent = None
        self.group = ""
        self.subscription = None
        self.recheck = None
        self.ended = False
        self.last_live = 0.0
        # Live events arrive on the subscription's task, the page's message on this one:
        # one at a time, or both could send the same saved events.
        self.sending = asyncio.Lock()
        self.run_id = str(self.scope["url_route"]["kwargs"]["run_id"])
        user = self.scope.get("user")
        # Accept first so that the page gets a close code it can tell apart (a refused
        # handshake is only a 403), and does not try to reconnect.
        await self.accept()
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        run = await database_sync_to_async(selectors.run_with_release)(self.run_id)
        if run is None:
            await self.close(code=4404)
            return
        if not await database_sync_to_async(selectors.can_view_run)(user, run):
            await self.close(code=4403)
            return
        self.group = services.run_group(run.pk)
        self.run_over = not run.is_active
        self.subscription = await fanout().subscribe(self.group, self.run_event)
        if run.is_active:
            # A worker that died never says so: notice it here too (the page shows it).
            await database_sync_to_async(services.fail_if_stale)(run)

    async def _end(self) -> None:
        """The run is over and the page has all of it: close (the normal close code)."""
        self.ended = True
        await self.close()

    async def disconnect(self, code: int) -> None:
        self.ended = True
        if self.recheck is not None and self.recheck is not asyncio.current_task():
            self.recheck.cancel()
            await asyncio.gather(self.recheck, return_exceptions=True)
        self.recheck = None
        if self.subscription is not None:
            await fanout().unsubscribe(self.group, self.subscription)
            self.subscription = None

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.last_sent is not None or not self.group:
            return  # only the first message counts: where the page is
        async with self.sending:
            self.last_sent = _last_seq(text_data)
            self.last_live = time.monotonic()
            await self._catch_up()
            if self.run_over and not self.ended:
                # Over before the page connected, and the page has every event (or says
                # it has more than there are): nothing will come.
                await self._end()
        if not self.ended:
            self.recheck = asyncio.get_running_loop().create_task(self._read_the_database())

    async def _read_the_database(self) -> None:
        """Every `POLL_S` while the layer is down; after `QUIET_RECHECK_S` without a live
        event while it is up."""
        database_down = False
        while not self.ended:
            await asyncio.sleep(min(POLL_S, QUIET_RECHECK_S))
            live = self.subscription is not None and self.subscription.live
            if live and time.monotonic() - self.last_live < QUIET_RECHECK_S:
                continue
            async with self.sending:
                if self.ended:
                    return
                self.last_live = time.monotonic()
                try:
                    await self._catch_up()
                except (OperationalError, InterfaceError) as error:
                    # The database restarting: the page keeps its socket, and is read again.
                    if not database_down:
                        logger.warning("run page %s: %s", self.run_id, describe(error))
                    database_down = True
                else:
                    database_down = False

    async def run_event(self, message: dict[str, Any]) -> None:
        """A live event from the group (on the subscription's task, not through Channels'
        dispatch: no hop to the sync thread per event, which a live event does not need)."""
        async with self.sending:
            if message.get("type") == LIVE_AGAIN:
                # Live from here on; what went by before is in the database.
                if self.last_sent is not None and not self.ended:
                    await self._catch_up()
                return
            await self._relay(message)

    async def _relay(self, message: dict[str, Any]) -> None:
        if self.last_sent is None:
            return  # the replay, still to come, reads it from the database
        self.last_live = time.monotonic()
        seq = int(message["seq"])
        if seq <= self.last_sent:
            return
        if seq > self.last_sent + 1:
            await self._catch_up()
            return
        await self.send(text_data=message["html"])
        self.last_sent = seq
        if message.get("terminal"):
            await self._end()

    async def _catch_up(self) -> None:
        """Send every saved event after the last one sent, in batches."""
        while True:
            events = await database_sync_to_async(_events_after)(self.run_id, self.last_sent or 0)
            if not events:
                return
            html = await database_sync_to_async(render_live)(events)
            await self.send(text_data=html)
            self.last_sent = events[-1].seq
            if events[-1].kind in TERMINAL_KINDS:
                await self._end()
                return
            if len(events) < REPLAY_BATCH:
                return


def _events_after(run_id: str, after: int) -> list[AgentEvent]:
    return list(
        AgentEvent.objects.filter(conversation_id=run_id, seq__gt=after).order_by("seq")[
            :REPLAY_BATCH
        ]
    )


# The largest event number a run can have (the column is a 32-bit integer): a page claiming
# more has every event, and a bigger number would overflow the database's query.
MAX_SEQ = 2**31 - 1


def _last_seq(text: str | None) -> int:
    """The page's "last_seq", or 0 (replay everything) for anything else than a number."""
    try:
        value = json.loads(text or "{}").get("last_seq", 0)
    except (ValueError, AttributeError, RecursionError):
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return 0
    return min(value, MAX_SEQ)
