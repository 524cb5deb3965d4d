"""Where a run meets an eval trial, without importing evals.

Why a hook, not an import: a trial is a run, so evals stands above sources and assessments,
yet the API a trial's tools call and the trial's run page answer from its scenario.

evals builds on releases, sources and assessments (a trial is a releases `Conversation` whose
metadata carries its scenario), so none of them may import it. The places that need the evals
app ask these hooks instead, which `EvalsConfig.ready` installs (evals/apps.py):

- the release API (sources/release_api.py, assessments/report_api.py) answers a trial's tools
  from its scenario, never from a real release (`evals/api_source.py`; the drill-downs from the
  release `trial_release` gives, if any);
- a run's page says how the trial it was was judged (`evals.selectors.trial_verdict`, through
  `assessments.selectors`).

Without the evals app there are no trials.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeGuard

if TYPE_CHECKING:
    from django.http import HttpResponseBase, JsonResponse

    from releases.models import Conversation, Release


class TrialApi(Protocol):
    def is_eval_trial(self, conversation: Conversation | None) -> TypeGuard[Conversation]: ...

    def summary_response(
        self,
        conversation: Conversation,
        version: str,
        *,
        asynchronous: bool = True,
        brief: bool = False,
    ) -> HttpResponseBase: ...

    def file_report(
        self,
        conversation: Conversation,
        *,
        release_id: str,
        severity: str,
        findings: list[str],
        summary: str,
    ) -> JsonResponse: ...


@dataclass(frozen=True)
class TrialVerdict:
    """How an eval trial was judged, for its run page: the status, why it failed, and the
    checks that did not pass (e.g. "filed low, expected high")."""

    status: str  # passed, failed, errored
    severity_filed: str | None
    reasons: list[str]
    failed_checks: list[tuple[str, str, str]]  # (dimension, check, detail)
    result_id: int
    eval_run_id: int


class TrialRelease(Protocol):
    """The release whose ingested detail (tests, commits, metric samples) answers an eval
    trial's drill-down calls (`GET /api/releases/<version>/tests` and the others), or None
    when its scenario has none."""

    def __call__(self, run: Conversation, version: str) -> Release | None: ...


class TrialVerdicts(Protocol):
    def __call__(self, run: Conversation) -> TrialVerdict | None: ...


@dataclass
class Hooks:
    trial_api: TrialApi | None = None
    trial_verdict: TrialVerdicts | None = None
    trial_release: TrialRelease | None = None


installed = Hooks()


def trial_api(run: Conversation | None) -> TrialApi | None:
    """Who answers the API for this run: the evals app when it is an eval trial, else None."""
    api = installed.trial_api
    return api if api is not None and api.is_eval_trial(run) else None


def trial_release(run: Conversation, version: str) -> Release | None:
    """The release behind an eval trial's drill-downs; None (a 404) until the evals app
    installs a hook that gives one."""
    hook = installed.trial_release
    return hook(run, version) if hook is not None else None


def trial_verdict(run: Conversation) -> TrialVerdict | None:
    """How the eval trial this run was was judged, or None for an assessment."""
    verdicts = installed.trial_verdict
    return verdicts(run) if verdicts is not None else None
