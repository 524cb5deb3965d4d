"""A release's metrics from a Prometheus server, over its HTTP API (instant `/api/v1/query` and
range `/api/v1/query_range`), with PromQL templates configurable per service.

The errors this module raises, all translated from httpx and from Prometheus's answers in one
place (`PrometheusClient._get`, with `_translated` for the transport):

    PrometheusError                 anything that kept the query from giving an answer
    ├── PrometheusUnreachable       the server could not be reached (refused, DNS, TLS, ...)
    │   └── PrometheusTimeout       connecting, sending or waiting for the answer took too long
    ├── PrometheusHTTPError         an HTTP status other than 200 without Prometheus's error body
    ├── PrometheusQueryError        Prometheus refused the query (`"status": "error"`)
    └── PrometheusResponseError     an answer not in the API's shape (not JSON, not a number)

    QueryTemplateError (ValueError) a PromQL template with a placeholder this module does not fill

Values arrive as strings; "NaN", "+Inf", "-Inf" and an empty result are *missing* (None), never
zero. The windows (the release's from its deploy time, the baseline the previous release's or a
week earlier) are in `windows.py`, shared with the file reader. docs/using/metrics.md says it
all for users.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from sources.parsers.records import MetricSampleRecord, MetricSummary, finite
from sources.parsers.windows import (
    DEFAULT_WINDOW,
    ReleaseMetrics,
    Window,
    WindowMetrics,
    baseline_window,
    release_window,
)


class PrometheusError(Exception):
    """The metrics could not be read from Prometheus; the message says why, for a person."""


class PrometheusUnreachable(PrometheusError):
    pass


class PrometheusTimeout(PrometheusUnreachable):
    pass


class PrometheusHTTPError(PrometheusError):
    def __init__(self, message: str, status_code: int) -> None:
        super().__init__(message)
        self.status_code = status_code


class PrometheusQueryError(PrometheusError):
    def __init__(self, message: str, error_type: str, status_code: int) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.status_code = status_code


class PrometheusResponseError(PrometheusError):
    pass


class QueryTemplateError(ValueError):
    pass


DEFAULT_TIMEOUT = 10.0

# The summary keys, their PromQL defaults, and the factor into the summary's unit.
DEFAULT_ERROR_RATE = (
    'sum(rate(http_requests_total{service="{service}",code=~"5.."}[{window}]))'
    ' / sum(rate(http_requests_total{service="{service}"}[{window}]))'
)
DEFAULT_P95_SECONDS = (
    "histogram_quantile(0.95, sum by (le) "
    '(rate(http_request_duration_seconds_bucket{service="{service}"}[{window}])))'
)

PLACEHOLDERS = frozenset({"service", "version", "window"})
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class MetricQueries:
    """The PromQL of one service. `{service}` and `{version}` are filled in as PromQL string
    contents (quotes and backslashes escaped; write them inside "..."), `{window}` as a PromQL
    duration: the window's length in instant queries, `rate_interval` in range queries."""

    error_rate: str = DEFAULT_ERROR_RATE
    response_time_p95: str = DEFAULT_P95_SECONDS
    # The p95 query's unit into milliseconds: 1000 for seconds, 1 when it answers ms.
    response_time_p95_factor: float = 1000.0
    rate_interval: timedelta = timedelta(minutes=5)
    step: timedelta = timedelta(minutes=1)

    def __post_init__(self) -> None:
        for key in ("error_rate", "response_time_p95"):
            unknown = set(_PLACEHOLDER.findall(getattr(self, key))) - PLACEHOLDERS
            if unknown:
                raise QueryTemplateError(
                    f"the {key} query has {', '.join(sorted('{' + u + '}' for u in unknown))}; "
                    f"the placeholders are {{service}}, {{version}} and {{window}}"
                )
        if self.step <= timedelta(0) or self.rate_interval < timedelta(seconds=1):
            raise QueryTemplateError("step and rate_interval must be positive (at least 1 s)")

    def templates(self) -> dict[str, tuple[str, float]]:
        return {
            "error_rate": (self.error_rate, 1.0),
            "response_time_p95": (self.response_time_p95, self.response_time_p95_factor),
        }


@dataclass(frozen=True)
class MetricsConfig:
    """The queries for each service, and the ones for a service not named."""

    default: MetricQueries = field(default_factory=MetricQueries)
    services: Mapping[str, MetricQueries] = field(default_factory=dict)

    def for_service(self, service: str) -> MetricQueries:
        return self.services.get(service, self.default)


_DURATION = re.compile(r"^(\d+)(ms|s|m|h|d|w)$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(value: str | int | float) -> timedelta:
    """Seconds (a number) or a simple PromQL duration (`90s`, `5m`, `1h`) as a timedelta."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return timedelta(seconds=value)
    match = _DURATION.match(str(value).strip())
    if not match:
        raise QueryTemplateError(f"{value!r} is not a duration (seconds, or like 90s, 5m, 1h)")
    return timedelta(seconds=int(match.group(1)) * _UNITS[match.group(2)])


def queries_from_mapping(settings: Mapping[str, Any]) -> MetricQueries:
    """One service's queries from plain settings (e.g. a JSON object): the keys of
    MetricQueries, durations as seconds or `5m`; anything not given keeps its default."""
    known = {"error_rate", "response_time_p95", "response_time_p95_factor", "rate_interval", "step"}
    unknown = set(settings) - known
    if unknown:
        raise QueryTemplateError(
            f"unknown metric query settings {sorted(unknown)}; known: {sorted(known)}"
        )
    values: dict[str, Any] = dict(settings)
    for key in ("rate_interval", "step"):
        if key in values:
            values[key] = parse_duration(values[key])
    if "response_time_p95_factor" in values:
        values["response_time_p95_factor"] = float(values["response_time_p95_factor"])
    return MetricQueries(**values)


def config_from_mapping(settings: Mapping[str, Any]) -> MetricsConfig:
    """`{"default": {...}, "services": {"checkout": {...}}}` as a MetricsConfig; a service's
    settings fill in over the default's."""
    unknown = set(settings) - {"default", "services"}
    if unknown:
        raise QueryTemplateError(f"unknown metrics settings {sorted(unknown)}")
    default_settings = dict(settings.get("default") or {})
    services = settings.get("services") or {}
    return MetricsConfig(
        default=queries_from_mapping(default_settings),
        services={
            str(name): queries_from_mapping({**default_settings, **dict(own)})
            for name, own in services.items()
        },
    )


def promql_string(value: str) -> str:
    """`value` as the inside of a double-quoted PromQL string."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def promql_duration(length: timedelta) -> str:
    """A PromQL duration (`30m`, `2h`, `90s`) for a whole number of seconds, at least one."""
    seconds = int(length.total_seconds())
    if seconds < 1 or seconds != length.total_seconds():
        raise QueryTemplateError(f"a window of {length} is not a whole number of seconds >= 1")
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def render(template: str, *, service: str, version: str, window: timedelta) -> str:
    """The template with its placeholders filled; PromQL's own braces are left alone."""
    values = {
        "service": promql_string(service),
        "version": promql_string(version),
        "window": promql_duration(window),
    }

    def fill(match: re.Match[str]) -> str:
        if match.group(1) not in values:
            raise QueryTemplateError(f"unknown placeholder {match.group(0)} in {template!r}")
        return values[match.group(1)]

    return _PLACEHOLDER.sub(fill, template)


# ---------------------------------------------------------------------------------------------
# The client


class PrometheusClient:
    """Instant and range queries against one Prometheus server (sync; httpx)."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"),
            timeout=timeout,
            headers=dict(headers or {}),
            transport=transport,
        )
        url = httpx.URL(base_url)
        # Where, for messages: never the user name, password or query string of the URL.
        self.where = f"{url.scheme}://{url.host}{f':{url.port}' if url.port else ''}{url.path}"

    def __enter__(self) -> PrometheusClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def query(self, promql: str, at: datetime, *, name: str = "") -> list[MetricSampleRecord]:
        """The instant query's samples at `at`: one per series (a scalar is one sample)."""
        data = self._get("/api/v1/query", {"query": promql, "time": _unix(at)})
        kind, result = data.get("resultType"), data.get("result")
        if kind == "scalar" and isinstance(result, list):
            return [self._sample(name, {}, result)]
        if kind != "vector" or not isinstance(result, list):
            raise PrometheusResponseError(f"{self.where}: expected a vector, got {kind!r}")
        return [self._sample(name, self._labels(series), series.get("value")) for series in result]

    def query_range(
        self, promql: str, start: datetime, end: datetime, step: timedelta, *, name: str = ""
    ) -> list[MetricSampleRecord]:
        """The range query's samples, series by series, each in time order."""
        params = {
            "query": promql,
            "start": _unix(start),
            "end": _unix(end),
            "step": f"{step.total_seconds():g}",
        }
        data = self._get("/api/v1/query_range", params)
        result = data.get("result")
        if data.get("resultType") != "matrix" or not isinstance(result, list):
            raise PrometheusResponseError(
                f"{self.where}: expected a matrix, got {data.get('resultType')!r}"
            )
        samples: list[MetricSampleRecord] = []
        for series in result:
            labels = self._labels(series)
            points = series.get("values")
            if not isinstance(points, list):
                raise PrometheusResponseError(f"{self.where}: a series without values")
            samples.extend(self._sample(name, labels, point) for point in points)
        return samples

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """httpx's errors as this module's: the one place they are translated."""
        try:
            yield
        except httpx.TimeoutException as error:
            raise PrometheusTimeout(
                f"Prometheus at {self.where} did not answer in time ({type(error).__name__})"
            ) from error
        except httpx.TransportError as error:
            raise PrometheusUnreachable(
                f"Prometheus at {self.where} cannot be reached: {error or type(error).__name__}"
            ) from error

    def _get(self, path: str, params: dict[str, str]) -> dict[str, Any]:
        """The `data` of a successful answer; every other answer raised as a PrometheusError."""
        with self._translated():
            response = self._http.get(path, params=params)
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, dict) and body.get("status") == "error":
            error_type = str(body.get("errorType") or "error")
            raise PrometheusQueryError(
                f"Prometheus at {self.where} refused the query ({error_type}, HTTP "
                f"{response.status_code}): {body.get('error') or 'no reason given'}",
                error_type,
                response.status_code,
            )
        if response.status_code != 200:
            raise PrometheusHTTPError(
                f"Prometheus at {self.where} answered HTTP {response.status_code} "
                f"{response.reason_phrase} to {path}",
                response.status_code,
            )
        if not isinstance(body, dict) or body.get("status") != "success":
            raise PrometheusResponseError(
                f"Prometheus at {self.where} answered {path} with something that is not the "
                "API's JSON (no status: success)"
            )
        data = body.get("data")
        if not isinstance(data, dict):
            raise PrometheusResponseError(f"Prometheus at {self.where}: an answer without data")
        return data

    def _labels(self, series: Any) -> dict[str, str]:
        if not isinstance(series, dict) or not isinstance(series.get("metric"), dict):
            raise PrometheusResponseError(f"{self.where}: a series without its labels")
        return {str(k): str(v) for k, v in series["metric"].items()}

    def _sample(self, name: str, labels: dict[str, str], point: Any) -> MetricSampleRecord:
        """One [unix time, "value"] pair; the value is a string, NaN and ±Inf are missing."""
        if not isinstance(point, list) or len(point) != 2 or not isinstance(point[1], str):
            raise PrometheusResponseError(f'{self.where}: a sample not [time, "value"]: {point}')
        try:
            moment = datetime.fromtimestamp(float(point[0]), tz=UTC)
            value = float(point[1])
        except (TypeError, ValueError, OverflowError, OSError) as error:
            message = f"{self.where}: a sample not a number (or a time out of range): {point}"
            raise PrometheusResponseError(message) from error
        labels = dict(labels)
        metric_name = labels.pop("__name__", "")
        return MetricSampleRecord(
            name=name or metric_name,
            labels=tuple(sorted(labels.items())),
            timestamp=moment,
            value=finite(value),
        )


def _unix(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise ValueError(f"{moment} has no time zone; Prometheus times are absolute")
    return f"{moment.timestamp():.3f}"


# ---------------------------------------------------------------------------------------------
# Windows and the release's metrics


def window_metrics(
    client: PrometheusClient,
    queries: MetricQueries,
    window: Window,
    *,
    service: str,
    version: str,
    now: datetime | None = None,
) -> WindowMetrics:
    """One window's samples (range queries) and figures (instant queries at its end, over its
    length). A window still open is cut at `now`; one not begun yet has nothing (missing)."""
    now = now or datetime.now(tz=UTC)
    # Whole seconds, as a PromQL duration needs (a deploy or a `now` carries microseconds).
    length = timedelta(seconds=int((min(window.end, now) - window.start).total_seconds()))
    if length < timedelta(seconds=1):
        return WindowMetrics(window, (), MetricSummary())
    end = window.start + length
    samples: list[MetricSampleRecord] = []
    figures: dict[str, float | None] = {}
    for key, (template, factor) in queries.templates().items():
        over_window = render(template, service=service, version=version, window=length)
        answer = client.query(over_window, end, name=key)
        figures[key] = _single(client, key, answer, factor)
        per_step = render(template, service=service, version=version, window=queries.rate_interval)
        # Prometheus answers at most 11,000 points a series.
        step = max(queries.step, length / 10_000)
        for sample in client.query_range(per_step, window.start, end, step, name=key):
            value = None if sample.value is None else sample.value * factor
            samples.append(MetricSampleRecord(key, sample.labels, sample.timestamp, value))
    error_rate = figures["error_rate"]
    if error_rate is not None and not 0.0 <= error_rate <= 1.0:
        raise PrometheusResponseError(
            f"the error_rate query for {service} answered {error_rate:g}: an error rate is a "
            "fraction between 0 and 1 (a percentage? divide it by 100 in the query)"
        )
    summary = MetricSummary(error_rate=error_rate, response_time_p95=figures["response_time_p95"])
    return WindowMetrics(window, tuple(samples), summary)


def _single(
    client: PrometheusClient, key: str, answer: list[MetricSampleRecord], factor: float
) -> float | None:
    """The one figure of an instant answer: none (or NaN / Inf) is missing; several series
    mean the template forgot to aggregate, which a figure cannot hide."""
    if len(answer) > 1:
        raise PrometheusResponseError(
            f"the {key} query answered {len(answer)} series at {client.where}; it must answer "
            "one (aggregate it, e.g. sum(...) or max(...))"
        )
    if not answer or answer[0].value is None:
        return None
    value = answer[0].value * factor
    return value if math.isfinite(value) else None


def release_metrics(
    client: PrometheusClient,
    config: MetricsConfig,
    *,
    service: str,
    version: str,
    deploy_time: datetime,
    previous_version: str | None = None,
    previous_deploy_time: datetime | None = None,
    length: timedelta = DEFAULT_WINDOW,
    now: datetime | None = None,
) -> ReleaseMetrics:
    """The release's window and its baseline's, each with samples and figures. In the baseline
    `{version}` is the previous release's version (this one's when there is none)."""
    queries = config.for_service(service)
    own = release_window(deploy_time, length)
    base = baseline_window(own, previous_deploy_time)
    return ReleaseMetrics(
        release=window_metrics(client, queries, own, service=service, version=version, now=now),
        baseline=window_metrics(
            client, queries, base, service=service, version=previous_version or version, now=now
        ),
    )
