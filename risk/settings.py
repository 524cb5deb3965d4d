"""The risk policy's settings: every threshold and switch, as data.

The admin edits them (releases/policy_admin.py) and every edit is a new version of the policy
(`releases.models.RiskPolicy`); a stored version that lacks a setting added since reads it at
its default.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from risk.judge import DEFAULT_METRICS, JudgeSettings, MetricSettings

# How one route's per-minute figures are judged (risk/route_signals.py): a route's minute holds
# a few requests where the service's holds hundreds, so its error rate is judged on the mean of
# the minutes' rates (their median is 0 below one error a minute) and asked to double and rise
# by a percentage point; its p95 to double and rise by 100 ms (decision
# 2026-11-29-routes-against-their-baseline: false alarms and misses measured).
DEFAULT_ROUTE_METRICS: dict[str, MetricSettings] = {
    "error_rate": MetricSettings(
        label="error rate", percent=True, effect="mean", allowed_ratio=2.0,
        min_absolute_change=0.01,
    ),
    "response_time_p95": MetricSettings(
        label="p95", unit="ms", allowed_ratio=2.0, min_absolute_change=100.0
    ),
}  # fmt: skip

Level = Literal["none", "low", "medium", "high"]
Severity = Literal["low", "medium", "high"]

LEVEL_RANK: dict[str, int] = {"none": 0, "low": 1, "medium": 2, "high": 3}
SEVERITY_RANK: dict[str, int] = {"low": 1, "medium": 2, "high": 3}

DEFAULT_CRITICAL_AREAS: dict[str, list[str]] = {
    "payments": [
        "payment", "pay", "checkout", "refund", "ledger", "payout", "billing", "invoice", "psp",
        "3ds", "3-d secure", "charge", "capture",
    ],
    "auth": [
        "auth", "authentication", "login", "logout", "session", "token", "password",
        "oauth", "oidc", "sso", "2fa", "mfa", "identity provider", "permission",
    ],
    "security": [
        "security", "secure", "csrf", "xss", "encryption", "encrypt", "secret",
        "vulnerability", "cve", "rate limit", "rate limiting",
    ],
    "data": ["data integrity", "backfill", "data loss", "purge", "truncate"],
    "migrations": ["migration", "migrate", "schema", "alter table"],
}  # fmt: skip

# The area schema changes count in (the critical areas above name it).
SCHEMA_AREA = "migrations"
# Within one sentence: up to 40 characters without a full stop, but a dot inside a name
# ("orders.legacy_status") is no full stop.
_NEAR = r"(?:[^.;\n]|\.(?=\w)){0,40}"
DEFAULT_SCHEMA_CHANGE_PATTERNS: tuple[str, ...] = (
    # "Upgraded the primary database from PostgreSQL 13 to 16"
    r"\b(upgrad|downgrad|migrat|switch|mov)\w*\b" + _NEAR + r"\b(database|db|postgres\w*|mysql"
    r"|mariadb|sqlite|oracle|mongo\w*|schema)s?\b",
    r"\b(database|postgres\w*|mysql|mariadb)\b" + _NEAR + r"\b(upgrad|downgrad|migrat)\w*",
    # "Dropped the unused orders.legacy_status column", "ALTER TABLE", "rename index"
    r"\b(drop|alter|renam|truncat)\w*\b" + _NEAR + r"\b(column|table|index|indexes|constraint"
    r"|schema)s?\b",
)
DEFAULT_CRITICAL_PATHS: dict[str, list[str]] = {
    SCHEMA_AREA: [
        "*/migrations/*", "migrations/*", "*/migrate/*", "*/alembic/*", "alembic/*",
        "*/flyway/*", "*/liquibase/*", "*.sql", "*schema.*", "*schema/*", "*.prisma",
    ],
}  # fmt: skip
# Where each critical area's code lies, as path globs (case-insensitive, `*` crosses folders),
# the way CODEOWNERS names owners: a commit is in an area by its code files, not its words.
DEFAULT_CHANGE_AREA_PATHS: dict[str, list[str]] = {
    "payments": [
        "payments/*", "*/payments/*", "payment/*", "*/payment/*", "billing/*", "*/billing/*",
        "checkout/*", "*/checkout/*", "ledger/*", "*/ledger/*", "payouts/*", "*/payouts/*",
        "refunds/*", "*/refunds/*", "invoicing/*", "*/invoicing/*",
    ],
    "auth": [
        "auth/*", "*/auth/*", "authentication/*", "*/authentication/*", "oauth/*", "*/oauth/*",
        "oauth2/*", "*/oauth2/*", "login/*", "*/login/*", "sso/*", "*/sso/*", "authz/*",
        "*/authz/*", "authn/*", "*/authn/*", "permissions/*", "*/permissions/*",
    ],
    "security": [
        "security/*", "*/security/*", "crypto/*", "*/crypto/*", "secrets/*", "*/secrets/*",
    ],
    "data": ["backfills/*", "*/backfills/*"],
    SCHEMA_AREA: [
        "*/migrations/*", "migrations/*", "*/migrate/*", "*/alembic/*", "alembic/*",
        "*/flyway/*", "*/liquibase/*", "*.sql", "schema.*", "*/schema.*", "*/schema/*", "*.prisma",
    ],
}  # fmt: skip
# A removed file here is a removed public route or API: a breaking change.
DEFAULT_PUBLIC_API_PATHS: list[str] = [
    "*/api/*", "api/*", "*/routes/*", "routes/*", "*/urls.py", "*/openapi.*", "openapi.*",
    "*/proto/*.proto",
]  # fmt: skip


class ScaledName(BaseModel):
    """A metric name and the factor into its figure's unit (1000: seconds into ms)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z_:][A-Za-z0-9_:]*$")
    factor: float = Field(1.0, gt=0, allow_inf_nan=False)


class RequestCounterName(BaseModel):
    """A request counter split by a status label: the values matching the pattern are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z_:][A-Za-z0-9_:]*$")
    status_label: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    error_pattern: str = Field("5..", min_length=1, max_length=200)

    @field_validator("error_pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        try:
            re.compile(pattern)
        except re.error as error:
            raise ValueError(f"{pattern!r} is not a regular expression: {error}") from None
        return pattern


class PromQLSettings(BaseModel):
    """A service's PromQL (sources/parsers/prometheus.py `MetricQueries`); unset keeps the
    default. Placeholders: {service}, {version}, {window}."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    error_rate: str | None = Field(None, max_length=2000)
    response_time_p95: str | None = Field(None, max_length=2000)
    response_time_p95_factor: float | None = Field(None, gt=0, allow_inf_nan=False)
    rate_interval: str | None = Field(None, pattern=r"^\d+(ms|s|m|h|d|w)$")
    step: str | None = Field(None, pattern=r"^\d+(ms|s|m|h|d|w)$")


class MetricNames(BaseModel):
    """Which series give a service's error rate and p95, from a file and from Prometheus: its
    own names are tried before the defaults (docs/using/metrics.md lists those)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    error_rate_gauges: list[ScaledName] = Field(default_factory=list, max_length=20)
    request_counters: list[RequestCounterName] = Field(default_factory=list, max_length=20)
    p95_gauges: list[ScaledName] = Field(default_factory=list, max_length=20)
    latency_histograms: list[ScaledName] = Field(default_factory=list, max_length=20)
    prometheus: PromQLSettings = Field(default_factory=PromQLSettings)


# The key of `metric_names` that every service without its own entry reads.
EVERY_SERVICE = "*"


class PolicySettings(BaseModel):
    """Every threshold and switch of the policy. The defaults are policy version 1."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    error_rate_medium_at_or_above: float = Field(0.02, ge=0, le=1)
    error_rate_high_above: float = Field(0.05, ge=0, le=1)
    error_rate_critical: bool = True

    p95_ms_medium_above: float | None = Field(1000.0, ge=0)
    p95_ms_high_above: float | None = Field(None, ge=0)
    # The rise of p95 against the previous release (or the metrics' own baseline), as a
    # fraction: 0.2 is 20 % slower.
    p95_rise_medium_at_or_above: float | None = Field(0.2, ge=0)
    p95_rise_high_at_or_above: float | None = Field(None, ge=0)
    latency_critical: bool = False

    failed_tests_level: Level = "medium"
    failed_tests_high_at_or_above: int | None = Field(None, ge=1)
    failed_tests_critical: bool = False
    critical_area_failure_level: Level = "high"
    risky_changes_level: Level = "medium"
    risky_changes_with_failures_level: Level = "high"

    missing_data_level: Level = "medium"
    instructions_in_data_level: Level = "medium"
    # A quarter of the tests skipped says little about the release: worth a mention.
    skipped_share_low_at_or_above: float | None = Field(0.25, ge=0, le=1)

    critical_areas: dict[str, list[str]] = Field(
        default_factory=lambda: {k: list(v) for k, v in DEFAULT_CRITICAL_AREAS.items()}
    )

    # ---- Read from the release's detail and its service's history (risk/
    # history_signals.py). A release without detail has no history: these stay silent. ----

    # How many of the service's earlier releases the history looks back over: ten releases are
    # a few weeks of a weekly service, enough to see a test fail on and off, few enough that an
    # old, fixed failure does not count against today's.
    history_releases: int = Field(10, ge=1, le=100)
    # A failing test is known flaky when it failed and passed on the same release (here or in
    # a recent one), or failed in this many separate stretches of the recent releases (on and
    # off; one stretch is a failure that was fixed, and its return is a regression). Its
    # failure alone counts at `known_flaky_failures_level` and never makes a release high: the
    # same failure shipped before, and a release that is medium for every flaky test teaches
    # people to skip medium. A known-flaky test in code the release changed is not excused.
    known_flaky_failure_runs_at_or_above: int = Field(2, ge=2)
    known_flaky_failures_level: Level = "low"
    # Failing tests whose file, module or area matches a file the release changed.
    correlated_failures_level: Level = "medium"
    # Kamei et al.'s just-in-time metrics: a change's size (LA + LD), files (NF) and spread
    # (ND) predict its defects. The defaults sit far above a usual release (their projects'
    # median commit changes a few dozen lines in 2 to 3 files): a release past any of them
    # is one a reviewer could not read whole.
    large_change_lines_at_or_above: int | None = Field(1000, ge=1)
    large_change_files_at_or_above: int | None = Field(30, ge=1)
    large_change_directories_at_or_above: int | None = Field(10, ge=1)
    large_change_level: Level = "medium"
    # An author who never committed to any file they change here, in the service's earlier
    # releases (experience is Kamei et al.'s other predictor); more when it is a critical area.
    new_author_level: Level = "low"
    new_author_in_critical_area_level: Level = "medium"
    # The metric judge (risk/judge.py): this release's samples against its baseline
    # window (or the recent releases'), Mann-Whitney at this confidence, with at least this
    # many samples a window; per metric its direction, allowed ratio, minimum change, veto.
    metric_confidence: float = Field(0.95, gt=0, lt=1)
    metric_min_samples: int = Field(20, ge=1)
    metric_settings: dict[str, MetricSettings] = Field(
        default_factory=lambda: {name: m.model_copy() for name, m in DEFAULT_METRICS.items()}
    )
    metric_regression_level: Level = "medium"
    # A critical metric (the error rate) that fails vetoes: a canary judge would roll back.
    critical_metric_regression_level: Level = "high"
    # Too little data is never a pass: the report goes to a person.
    too_little_metric_data_level: Level = "medium"

    # ---- Newly skipped and newly flaky tests (issue 28, helper "policy") ----
    # A test skipped here that ran in the service's recent releases, never skipped there: said
    # in the evidence with its area, low; this many or more of one critical area at once (8 of
    # a payment suite's 20) is a suite switched off, medium.
    newly_skipped_level: Level = "low"
    newly_skipped_in_bulk_at_or_above: int = Field(5, ge=1)
    newly_skipped_in_bulk_level: Level = "medium"
    # A test that failed and passed in this release (a rerun, Surefire's flakyFailure) and
    # never failed in the recent releases: said with its area.
    newly_flaky_level: Level = "low"

    # ---- Read from the summary as well ----

    # A rise of p95 against the previous release smaller than this many ms is not a signal on
    # its own, whatever its percentage (120 -> 150 ms is 25 % and nothing a user notices); the
    # judge's own minimum change for p95 is the same 50 ms.
    p95_min_ms_rise: float | None = Field(50.0, ge=0)
    # Test results that ran nothing (0 passed, 0 failed, 0 skipped) show nothing: as missing.
    no_tests_ran_level: Level = "medium"
    # A run the runner marked interrupted, or one where fewer than this share of the usual
    # number of tests ran (the median of the recent releases with results, from
    # `partial_run_min_usual` tests): what did not run shows nothing, so it is never green
    # (risk/run_counts.py). A pytest run stopped at a time box stored 412 of 54,136 tests.
    partial_run_level: Level = "medium"
    partial_run_share_below: float | None = Field(0.5, gt=0, le=1)
    partial_run_min_usual: int = Field(20, ge=1)
    # Database upgrades and schema changes, found in change titles and commit messages by
    # these patterns (regular expressions, case-insensitive), and in changed paths by these
    # globs; both count as the area they are listed under.
    schema_change_patterns: list[str] = Field(
        default_factory=lambda: list(DEFAULT_SCHEMA_CHANGE_PATTERNS)
    )
    critical_paths: dict[str, list[str]] = Field(
        default_factory=lambda: {k: list(v) for k, v in DEFAULT_CRITICAL_PATHS.items()}
    )

    # ---- Change risk from what a commit touches (risk/changes.py; issue 28, "commits") ----
    # Per area, the globs of its code; `critical_paths` above adds a service's own.
    change_area_paths: dict[str, list[str]] = Field(
        default_factory=lambda: {k: list(v) for k, v in DEFAULT_CHANGE_AREA_PATHS.items()}
    )
    # An area word standing whole in a person's commit subject ("Fix the login form"), with
    # no code of the area changed: a mention worth saying, not a change in the area.
    subject_mention_level: Level = "low"
    # A breaking change: `feat(api)!:`, a `BREAKING CHANGE:` footer, a removed public API file.
    breaking_change_level: Level = "medium"
    public_api_paths: list[str] = Field(default_factory=lambda: list(DEFAULT_PUBLIC_API_PATHS))
    # Size judged against the service's own releases: with at least this many earlier releases
    # of commit detail that changed code (at most `history_releases`, the window read), a
    # change is large past the largest of them and `factor` times their median, never below
    # the floors; with fewer, the young-service rule below. 10, a full window: a few recent
    # releases are mostly patches (itsdangerous' 5 before 2.2.0: 2 to 310 lines, so its
    # ordinary 611-line minor release was medium), and the verdict then flipped with how many
    # releases were stored (decision 2026-11-29-suspects-on-real-bugs).
    large_change_history_releases: int = Field(10, ge=1)
    large_change_history_factor: float = Field(3.0, gt=1)
    large_change_lines_floor: int = Field(300, ge=1)
    large_change_files_floor: int = Field(10, ge=1)
    large_change_directories_floor: int = Field(5, ge=1)
    # A service with fewer earlier releases than that has no size of its own yet, and a
    # library's minor release is routinely past the fixed 1,000 lines (decision
    # 2026-11-27-change-size-without-history: 22 of 288 releases of 7 libraries, 3 past
    # 4,000). Until it has them, a change is large (`large_change_level`) from these lines
    # of code, or the fixed files or directories; past the fixed lines alone it is said at
    # `large_change_without_history_level` (low: in the evidence, raising nothing).
    large_change_without_history_lines_at_or_above: int | None = Field(4000, ge=1)
    large_change_without_history_level: Level = "low"

    # ---- Metrics read the Prometheus way (issue 28, item 2; helper "metrics") ----

    # The error rate against its baseline, as p95 is against its own: medium from this many
    # times the baseline (high from the second), when it rose by at least `error_rate_min_rise`
    # (a fraction: 0.005 is half a percentage point), so 0.3 % -> 1.1 % (3.7 times, 0.8
    # points) is medium and 0.01 % -> 0.05 % is nothing. Kayenta's and Argo Rollouts' users
    # set the same pair: an allowed increase and a floor under which no change counts.
    error_rise_times_medium_at_or_above: float | None = Field(2.0, ge=1)
    error_rise_times_high_at_or_above: float | None = Field(None, ge=1)
    error_rate_min_rise: float = Field(0.005, ge=0, le=1)
    # Which series give the error rate and the p95, by service slug ("*": any service without
    # an entry of its own); each service's names are tried before the exporters' defaults.
    metric_names: dict[str, MetricNames] = Field(default_factory=dict, max_length=200)

    # ---- What the running version does, from its OTLP traces (risk/trace_signals.py) ----

    # An error group never seen in the service's earlier releases nor in this release's
    # baseline; high from this share of its route's requests (critical: it alone may make a
    # release high, as the error rate does).
    new_error_group_level: Level = "medium"
    new_error_group_high_share_at_or_above: float | None = Field(0.05, ge=0, le=1)
    new_error_group_critical: bool = True
    # A new group whose in-app frames run through a critical area (by the path globs that put
    # a changed file there, `change_area_paths` and `critical_paths`): a charge that now
    # raises is a payment failing in production, as a failing payment test is high.
    new_error_group_in_critical_area_level: Level = "high"
    # A group an earlier release showed, the previous one did not, back in this one.
    regressed_error_group_level: Level = "medium"
    # Each route's error rate and p95, minute by minute, against its baseline (the minutes
    # before the deploy time, else the previous release's first from its deploy) through the
    # metric judge (risk/route_signals.py): the busiest `route_max_routes` routes, over the first
    # `route_window_minutes` minutes from the deploy, a minute counting from
    # `route_minute_min_requests` requests and a route judged from `route_min_minutes` such
    # minutes in each window (fewer: not judged, and nothing said). `metric_confidence` is
    # the family's: split evenly over the comparisons made (Bonferroni), so 20 routes of noise
    # raise a false alarm no more often than one metric does.
    route_regression_level: Level = "medium"
    route_max_routes: int = Field(20, ge=1, le=200)
    route_window_minutes: int = Field(60, ge=1, le=1440)
    route_minute_min_requests: int = Field(5, ge=1)
    route_min_minutes: int = Field(20, ge=2)
    route_metric_settings: dict[str, MetricSettings] = Field(
        default_factory=lambda: {name: m.model_copy() for name, m in DEFAULT_ROUTE_METRICS.items()}
    )

    def metric_names_for(self, service: str) -> MetricNames:
        return self.metric_names.get(service) or self.metric_names.get(EVERY_SERVICE, MetricNames())

    @field_validator("schema_change_patterns")
    @classmethod
    def _patterns_compile(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as error:
                raise ValueError(f"{pattern!r} is not a regular expression: {error}") from None
        return patterns

    def judge_settings(self) -> JudgeSettings:
        return JudgeSettings(
            confidence=self.metric_confidence,
            min_samples=self.metric_min_samples,
            metrics=dict(self.metric_settings),
        )


# (medium's setting, high's setting, what they measure): medium must start below high.
_ORDERED = (
    ("error_rate_medium_at_or_above", "error_rate_high_above", "error rate"),
    ("p95_ms_medium_above", "p95_ms_high_above", "p95 latency (ms)"),
    ("p95_rise_medium_at_or_above", "p95_rise_high_at_or_above", "p95 rise"),
    (
        "error_rise_times_medium_at_or_above",
        "error_rise_times_high_at_or_above",
        "error rate rise (times the baseline)",
    ),
)


def threshold_order_problems(cfg: PolicySettings) -> list[str]:
    """Thresholds out of order, in words: a medium threshold above its high one would call a
    release high before it is medium (the policy form and `new_policy_version` refuse it)."""
    problems = []
    for medium_name, high_name, what in _ORDERED:
        medium, high = getattr(cfg, medium_name), getattr(cfg, high_name)
        if medium is not None and high is not None and medium > high:
            problems.append(
                f"The {what} thresholds are out of order: medium starts at {medium:g} "
                f"({medium_name}), above high's {high:g} ({high_name}). Medium must start "
                "below high."
            )
    return problems
