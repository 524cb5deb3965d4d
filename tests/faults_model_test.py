"""Faults (issue 22, item 4): a model server's answers are numbers we can trust.

`Retry-After: nan` from the model server crashed the run ("Unexpected internal error"): NaN
reached the saved event and the database's JSON check refused it. Now the header is ignored,
the usual back-off applies, and the run goes on to its report.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable

import pytest
from django.core.management import call_command

from releases.models import AgentEvent, Conversation, Release, RunStatus
from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_retry_after_of_nan_is_ignored_and_the_run_succeeds(
    make_release: Callable[..., Release],
) -> None:
    release = make_release("v-nan-retry")
    with ScriptedLLM(mode="retry-after-nan") as llm:
        call_command(
            "assess",
            release.version,
            "--provider=openai-compatible",
            "--model=scripted",
            f"--base-url={llm.base_url}",
            stdout=io.StringIO(),
        )
        assert len(llm.requests) >= 2  # the 429, then the assessment
    run = Conversation.objects.get(release=release)
    assert run.status == RunStatus.SUCCEEDED, run.error
    retry = AgentEvent.objects.get(conversation=run, kind="retry_scheduled")
    delay = retry.payload["delay_s"]
    assert isinstance(delay, float) and math.isfinite(delay) and 0 < delay <= 60
    # Every figure of every saved event is finite (the JSON would not even encode otherwise).
    for event in AgentEvent.objects.filter(conversation=run):
        json.dumps(event.payload, allow_nan=False)
