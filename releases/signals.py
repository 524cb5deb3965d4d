"""What other apps may hear from releases without releases importing them: a verdict filed (a
risk report stored) and a verdict decided (a person's decision recorded).

Each is sent once the transaction that stored it has committed (so a receiver, or a task it
queues, sees the row), with `send_robust`: a receiver that fails is logged and never fails the
filing or the decision. The webhooks app listens (webhooks/apps.py).
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.dispatch import Signal

log = logging.getLogger(__name__)

# sender=RiskReport, report=<the stored RiskReport>
verdict_filed = Signal()
# sender=ReviewDecision, decision=<the stored ReviewDecision>
verdict_decided = Signal()


def send_on_commit(signal: Signal, sender: type, **fields: Any) -> None:
    def send() -> None:
        for receiver, outcome in signal.send_robust(sender=sender, **fields):
            if isinstance(outcome, Exception):
                log.error(
                    "a receiver of a releases signal failed: %s",
                    getattr(receiver, "__qualname__", receiver),
                    exc_info=outcome,
                )

    transaction.on_commit(send)
