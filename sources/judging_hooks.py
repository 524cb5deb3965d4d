"""Signals of apps above `sources` that the policy's verdict (sources/judging.py) weighs,
without importing them.

Why a hook, not an import: the `traces` app (issue 36) keeps what the running version does and
builds on sources (its ingestion tokens, the release's hunks for suspects), so sources may not
import it; `TracesConfig.ready` installs its reader here. Without it the verdict is the one the
release's sources alone give.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from releases.models import Release
    from risk.history import History
    from risk.settings import PolicySettings
    from risk.signal import Signal

ExtraSignals = Callable[["Release", "PolicySettings", "History"], "list[Signal]"]

_installed: list[ExtraSignals] = []


def install(reader: ExtraSignals) -> None:
    if reader not in _installed:
        _installed.append(reader)


def extra_signals(release: Release, settings: PolicySettings, past: History) -> list[Signal]:
    return [signal for reader in _installed for signal in reader(release, settings, past)]
