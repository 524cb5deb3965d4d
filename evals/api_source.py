"""Scenario data behind the release API, for eval trials only.

An eval trial runs the real agent with the real release tools, which call the site's API over
HTTP like any assessment (`GET /api/releases/<version>/summary`, `POST /api/risk-reports`).
What differs is the token: it belongs to the trial's Conversation, whose metadata marks it as
an eval trial (`metadata["eval"]`, written by the runner) and carries the scenario's release
data and the fault to inject. For such a caller the API asks this module instead of the
database, so a scenario never reads or writes a real release, even one of the same version:

- the summary is the scenario's `release_payload()`; no release, or another version than the
  scenario's, is a 404, as for a real release that does not exist;
- the scenario's fault is applied: `http_error` answers its status and body, `malformed_json`
  answers 200 with a body that is not JSON, `timeout` sends the headers and then hangs for
  `delay_s` (longer than the tools wait), as a stuck upstream would;
- a filed report (already validated by the API) is kept on the trial's Conversation
  (`metadata["eval_report"]`), where the runner reads it back; every filing is kept, so that
  the evaluators see a duplicate as such.

The payload travels in the Conversation row rather than being looked up in the suite files,
so that a server started from another checkout, or a suite outside `evals/scenarios/`, serves
exactly what the runner meant.

A scenario made of files (`evals/scenario_sources.py`) has a real release behind it, in a
hidden service of its own: the trial names it (`release_pk`), the summary and the filing are
judged from it as a real release's are (`judging.judge_release`), and the API's other calls
(the drill-downs) reach it through `trial_release` (installed as `eval_hooks.trial_release`).
The trial's Conversation does not point at the release itself: trials of one scenario may run
at once, and a release has one active run at a time.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from typing import Any, TypeGuard

from django.db import transaction
from django.http import HttpResponse, HttpResponseBase, JsonResponse, StreamingHttpResponse

from agent.tools.release_tools import SUMMARY_RETRY_DELAY_S
from assessments.filing import REFUSALS_KEY
from evals.scenario import Scenario
from releases import verdicts
from releases.models import Conversation, Release
from risk import filing
from risk.own_words import own_words
from sources import judging

EVAL_KEY = "eval"
REPORT_KEY = "eval_report"


# How much longer than the tools' timeout a `timeout` fault hangs.
HANG_MARGIN_S = 2.0


def trial_metadata(
    scenario: Scenario,
    *,
    run_id: int,
    trial: int,
    suite_version: str,
    tool_timeout_s: float | None = None,
    release_pk: int | None = None,
) -> dict[str, Any]:
    """What the runner puts under `metadata["eval"]` of a trial's Conversation.

    A `timeout` fault hangs no longer than the tools wait plus a margin: past that nobody
    listens, and served in-process a hanging answer holds one of the few threads that answer
    every trial's API calls. The tools wait for one request through both attempts (a retry
    after a timeout joins the request still running), so the hang outlasts both."""
    fault = scenario.tools.get_release_summary
    spec = fault.model_dump(mode="json") if fault is not None else None
    if spec is not None and spec.get("mode") == "timeout" and tool_timeout_s is not None:
        waited = 2 * tool_timeout_s + SUMMARY_RETRY_DELAY_S
        spec["delay_s"] = min(float(spec["delay_s"]), waited + HANG_MARGIN_S)
    return {
        EVAL_KEY: {
            "run_id": run_id,
            "scenario_id": scenario.id,
            "trial": trial,
            "suite_version": suite_version,
            "fingerprint": scenario.fingerprint,
            "release_id": scenario.release_id,
            "release": scenario.release_payload(),
            "release_pk": release_pk,
            "fault": spec,
        }
    }


def is_eval_trial(conversation: Conversation | None) -> TypeGuard[Conversation]:
    return conversation is not None and isinstance(
        (conversation.metadata or {}).get(EVAL_KEY), dict
    )


def _spec(conversation: Conversation) -> dict[str, Any]:
    return conversation.metadata[EVAL_KEY]


def _ingested(conversation: Conversation) -> Release | None:
    """The ingested release behind a trial of a scenario made of files (None for the others,
    whose data is the scenario's payload alone)."""
    pk = _spec(conversation).get("release_pk")
    if not isinstance(pk, int):
        return None
    return Release.objects.select_related("service").filter(pk=pk).first()


def trial_release(conversation: Conversation, version: str) -> Release | None:
    """The release whose detail answers a trial's drill-downs for `version`: its scenario's
    ingested release, when the trial asks about that one (None: a 404, as for any release
    the scenario does not have)."""
    if not is_eval_trial(conversation) or version != _spec(conversation).get("release_id"):
        return None
    return _ingested(conversation)


def _judged(conversation: Conversation, payload: dict[str, Any]) -> verdicts.Judged:
    release = _ingested(conversation)
    if release is None:
        return verdicts.judge_summary(payload)
    return _judged_release(release.pk, release.updated_at, verdicts.current_policy().version)


@functools.lru_cache(maxsize=64)
def _judged_release(pk: int, updated_at: datetime, policy_version: int) -> verdicts.Judged:
    """A release made of files judged once per version of it and of the policy: every trial of
    its scenario asks for its summary and files against it, and judging its history (the
    metric judge, the tests' past) took 0.3 s a time under load, in the one thread that serves
    a run's sync views, past a tool's timeout with eight trials at once."""
    return judging.judge_release(Release.objects.select_related("service").get(pk=pk))


def _data(conversation: Conversation, payload: dict[str, Any]) -> dict[str, Any]:
    release = _ingested(conversation)
    return release.as_summary() if release is not None else payload


def _not_found(version: str) -> JsonResponse:
    return JsonResponse({"error": f"No release {version!r}."}, status=404)


async def _hang(seconds: float) -> AsyncIterator[bytes]:
    # The client gives up first; its disconnect cancels this.
    await asyncio.sleep(seconds)
    yield b"{}"


def _hang_in_thread(seconds: float) -> Iterator[bytes]:
    # Under WSGI (the eval runner's in-process API) nothing cancels a stream: the request's
    # thread is held for the whole hang, which `HANG_MARGIN_S` keeps short.
    time.sleep(seconds)
    yield b"{}"


def summary_response(
    conversation: Conversation, version: str, *, asynchronous: bool = True, brief: bool = False
) -> HttpResponseBase:
    """The API's answer to a trial asking for release `version`'s summary.

    `asynchronous` says whether the server can stream an async iterator (ASGI) or must hang
    in the request's own thread (WSGI, where Django would warn and drain an async one).
    """
    spec = _spec(conversation)
    payload = spec.get("release")
    if version != spec.get("release_id") or payload is None:
        return _not_found(version)
    fault = spec.get("fault")
    if fault:
        mode = fault.get("mode")
        if mode == "http_error":
            body = fault.get("body") or "Internal Server Error"
            return HttpResponse(
                body, status=int(fault.get("status") or 500), content_type="text/plain"
            )
        if mode == "malformed_json":
            return HttpResponse(fault.get("body") or "{", content_type="application/json")
        if mode == "timeout":
            delay_s = float(fault.get("delay_s") or 60)
            hang = _hang(delay_s) if asynchronous else _hang_in_thread(delay_s)
            return StreamingHttpResponse(hang, content_type="application/json")
    # What a real release's summary carries: the data, the policy's signals beside it.
    return JsonResponse(_judged(conversation, payload).for_agent(brief=brief))


def file_report(
    conversation: Conversation,
    *,
    release_id: str,
    severity: str,
    findings: list[str],
    summary: str,
) -> JsonResponse:
    """Keep a (validated) report filed by a trial on the trial itself, checked against the
    policy as a real filing is (`assessments.filing.file_checked_report`): refused once with
    the problems, then kept, marked for review when it has problems."""
    spec = _spec(conversation)
    payload = spec.get("release")
    if release_id != spec.get("release_id") or payload is None:
        return _not_found(release_id)
    judged = _judged(conversation, payload)
    data = _data(conversation, payload)
    with transaction.atomic():
        # The agent's store merges its own metadata into the same row.
        row = Conversation.objects.select_for_update().get(pk=conversation.pk)
        refusals = list(row.metadata.get(REFUSALS_KEY, []))
        decision = filing.decide(
            severity=severity,
            findings=findings,
            summary=summary,
            data=data,
            verdict=judged.verdict,
            cfg=judged.settings,
            refused_before=bool(refusals),
            shown=judged.for_agent(),
        )
        if decision.refused:
            refusals.append({"problems": decision.problems})
            row.metadata = {**row.metadata, REFUSALS_KEY: refusals}
            row.save(update_fields=["metadata"])
            return JsonResponse(
                {"error": decision.refusal_message(), "problems": decision.problems}, status=422
            )
        reports = list(row.metadata.get(REPORT_KEY, {}).get("all", []))
        report_id = f"eval-{str(row.pk)[:8]}-{len(reports) + 1}"
        report = {
            "report_id": report_id,
            "release_id": release_id,
            "severity": severity,
            "findings": findings,
            "summary": summary,
            "policy_version": judged.policy.version,
            "policy_severity": decision.policy_severity,
            "needs_review": decision.needs_review,
            "review_reasons": decision.review_reasons,
            "notes": decision.notes,
            "grounding": decision.grounding.as_list(),
            # The policy's evidence the model left out, which a site's report would end with.
            # Kept apart: `findings` stay the model's, since the evals measure the model.
            "policy_findings": decision.from_policy,
            # What the API found wrong with the report, judged as a real filing is (for a
            # scenario made of files, with the release's history): the evaluators' truth.
            "problems": decision.problems,
        }
        # How much of the report's text (findings and summary) is the model's own, not the
        # policy's sentences, and how much of that holds (issue 40): a model that only copies
        # the policy adds nothing a person reads; one that writes its own must be right.
        said = own_words(
            findings,
            summary,
            [*(s.detail for s in judged.verdict.signals if s.detail), *decision.from_policy],
            report["grounding"],
        )
        report["own_share"] = said.share
        report["own_held"] = said.held
        report["own_unchecked"] = said.unchecked
        reports.append(report)
        row.metadata = {**row.metadata, REPORT_KEY: {"latest": report, "all": reports}}
        row.save(update_fields=["metadata"])
    return JsonResponse(report, status=201)


def filed_report(conversation_metadata: dict[str, Any]) -> dict[str, Any] | None:
    """The last report a trial filed, as `file_report` kept it."""
    stored = conversation_metadata.get(REPORT_KEY)
    return stored.get("latest") if isinstance(stored, dict) else None
