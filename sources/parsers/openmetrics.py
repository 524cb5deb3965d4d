"""Metric samples from OpenMetrics / Prometheus text exposition files, and the release's metric
summary (error rate, p95 response time) derived from samples.

Parsing is done by `prometheus_client` (the Prometheus project's own Python client), with its
`parser.text_fd_to_metric_families`, which reads label escapes, names and values of both the
Prometheus text format and OpenMetrics. Its OpenMetrics parser (`openmetrics.parser`) is
stricter but, as of 0.26.0, drops the buckets of every point after the first of a histogram
whose points carry timestamps (then refuses the file for a missing +Inf bucket): exactly the
files a backfill or an export holds. So OpenMetrics goes through the text parser too, with its
own rules added here (`# EOF` last, timestamps in seconds where the text format has
milliseconds); `openmetrics_test.py` keeps a check that tells when the strict parser is usable.
The parser raises a bare `ValueError`, often without the line, so this module feeds it the
text line by line, counts the lines it handed over, and turns any refusal into
`MetricsFormatError` with the file's name and that line. A file is read only after its size
was checked against a limit.

Values NaN, +Inf and -Inf are *missing* (`value=None`), never zero.

The summary (`summarize`) maps names to the two figures the policy reads; `SummaryNames` holds
the mapping and its defaults, documented in docs/using/metrics.md:

- `error_rate` (a fraction 0..1): a gauge `detective_error_rate` (or `detective_error_rate_percent`
  / 100), else the ratio of `http_requests_total` whose `code` is 5xx to all of it, counted as
  the increase over the window (one unstamped sample is taken as the window's count).
- `response_time_p95` (ms): a gauge `detective_response_time_p95_ms` (or `..._seconds` x 1000),
  else the histogram `http_request_duration_seconds` (its `_bucket` series summed by `le` over
  the window's increase) at q = 0.95 by the interpolation of PromQL's `histogram_quantile`, x 1000.
"""

from __future__ import annotations

import io
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import numpy
from prometheus_client import parser as prometheus_text

from sources.parsers.records import Labels, MetricSampleRecord, MetricSummary, finite
from sources.parsers.windows import (
    DEFAULT_WINDOW,
    ReleaseMetrics,
    Window,
    WindowMetrics,
    baseline_window,
    release_window,
)

__all__ = [
    "MetricSampleRecord",
    "MetricSummary",
    "MetricValueError",
    "MetricsFormatError",
    "Scaled",
    "SummaryNames",
    "file_release_metrics",
    "finite",
    "histogram_quantile",
    "increase",
    "parse_metrics",
    "parse_metrics_file",
    "summarize",
]

# A release's metrics export is small; a file this big is a mistake (or an attack).
MAX_BYTES = 20 * 1024 * 1024

Format = Literal["auto", "openmetrics", "prometheus"]


class MetricsFormatError(ValueError):
    """A metrics file was refused: `source` names it, `line` is where reading stopped (1-based;
    0 when the whole file is refused, e.g. for its size)."""

    def __init__(self, source: str, line: int, reason: str) -> None:
        self.source = source
        self.line = line
        self.reason = reason
        where = f"{source}, line {line}" if line else source
        super().__init__(f"{where}: {reason}")


class MetricValueError(ValueError):
    """A mapped value cannot be what its summary key says (an error rate above 1, a negative
    duration): the mapping or the query is wrong, and guessing would hide it."""


def parse_metrics_file(
    path: str | Path, *, format: Format = "auto", max_bytes: int = MAX_BYTES
) -> list[MetricSampleRecord]:
    """The samples of a metrics file; its size is checked before it is read."""
    path = Path(path)
    size = path.stat().st_size
    if size > max_bytes:
        raise MetricsFormatError(path.name, 0, f"{size} bytes, over the limit of {max_bytes}")
    return parse_metrics(path.read_bytes(), source=path.name, format=format, max_bytes=max_bytes)


def parse_metrics(
    data: bytes | str, *, source: str, format: Format = "auto", max_bytes: int = MAX_BYTES
) -> list[MetricSampleRecord]:
    """The samples of an OpenMetrics or Prometheus text exposition, in file order.

    `format="auto"` reads OpenMetrics when the last non-blank line is `# EOF` (the format
    requires it), else the Prometheus text format. Raises MetricsFormatError naming `source`
    and the line on anything malformed, on bytes that are not UTF-8, and over `max_bytes`.
    """
    size = len(data.encode() if isinstance(data, str) else data)
    if size > max_bytes:
        raise MetricsFormatError(source, 0, f"{size} bytes, over the limit of {max_bytes}")
    text = data if isinstance(data, str) else _decode(data, source)
    if format == "auto":
        format = "openmetrics" if _last_line(text) == "# EOF" else "prometheus"
    elif format == "openmetrics" and _last_line(text) != "# EOF":
        lines = len(text.splitlines())
        raise MetricsFormatError(source, lines, "OpenMetrics ends with a line '# EOF'; not found")
    # The text format stamps in milliseconds (the parser divides by 1000), OpenMetrics in seconds.
    to_seconds = 1000.0 if format == "openmetrics" else 1.0
    counter = _LineCounter(io.StringIO(text, newline="\n"))
    records: list[MetricSampleRecord] = []
    try:
        for family in prometheus_text.text_fd_to_metric_families(counter):
            records.extend(_record(sample, to_seconds) for sample in family.samples)
    # The parser is lax about how it fails: besides ValueError, an odd line can surface as an
    # IndexError or KeyError from inside it. All of it means "this file is malformed".
    except (ValueError, IndexError, KeyError, TypeError) as error:
        reason = str(error) or "not valid in this format"
        raise MetricsFormatError(
            source, max(counter.line, 1), f"{reason} ({_format_name(format)})"
        ) from error
    return records


def _format_name(format: Format) -> str:
    return "OpenMetrics" if format == "openmetrics" else "Prometheus text format"


def _decode(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise MetricsFormatError(source, line, "not UTF-8 text") from error


def _last_line(text: str) -> str:
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()
    return ""


class _LineCounter:
    """Hands the parser one line at a time and remembers how many it handed over."""

    def __init__(self, lines: Iterable[str]) -> None:
        self._lines = iter(lines)
        self.line = 0

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        line = next(self._lines)
        self.line += 1
        _check_fields(line)
        return line


def _check_fields(line: str) -> None:
    """A sample line is a name, labels, a value and an optional timestamp. The client's parser
    takes the *last* field as the timestamp, so `x 1 2 3`, or an exemplar after the value,
    would pass with a wrong time: refused here instead."""
    text = line.strip()
    if not text or text.startswith("#"):
        return
    rest = _after_labels(text)
    fields = len(rest.split())
    if fields > 2:
        raise ValueError(
            f"{fields} fields after the name and labels, where a value and an optional "
            "timestamp go (exemplars are not accepted)"
        )


def _after_labels(text: str) -> str:
    """What follows a sample's name and labels (a quote-aware walk to the closing brace)."""
    brace = text.find("{")
    space = min((i for i in (text.find(" "), text.find("\t")) if i >= 0), default=len(text))
    if brace < 0 or brace > space:
        return text[space:]
    quoted = escaped = False
    for index in range(brace + 1, len(text)):
        char = text[index]
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = quoted
        elif char == '"':
            quoted = not quoted
        elif char == "}" and not quoted:
            return text[index + 1 :]
    return ""


def _record(sample: Any, to_seconds: float) -> MetricSampleRecord:
    timestamp = None
    if sample.timestamp is not None:
        seconds = round(float(sample.timestamp) * to_seconds, 6)
        try:
            timestamp = datetime.fromtimestamp(seconds, tz=UTC)
        except (ValueError, OverflowError, OSError):
            # Past year 9999, before year 1, or NaN: no instant a window could hold.
            raise MetricsFormatError(
                f"{sample.name}: the timestamp {sample.timestamp} is out of range (years 1 to 9999)"
            ) from None
    return MetricSampleRecord(
        name=sample.name,
        labels=tuple(sorted(sample.labels.items())),
        timestamp=timestamp,
        value=finite(float(sample.value)),
    )


# ---------------------------------------------------------------------------------------------
# From samples to the release's summary


@dataclass(frozen=True)
class Scaled:
    """A metric name and the factor that turns its values into the summary key's unit."""

    name: str
    factor: float = 1.0


@dataclass(frozen=True)
class RequestCounter:
    """A request counter split by a status label into errors and all requests."""

    name: str
    status_label: str
    # A full match of the label's value marks an error (5xx by default).
    error_pattern: str = r"5.."


# The request counters and latency histograms of the exporters people run, tried in this
# order (docs/using/metrics.md lists them): prometheus_client, django-prometheus, Micrometer,
# OpenTelemetry's HTTP semantic conventions (as its Prometheus exporter names them), and
# ingress-nginx. A counter without `_total` declared `# TYPE x counter` in the text format is
# read as `x_total` by the client's parser, so both spellings are listed for ingress-nginx.
DEFAULT_REQUEST_COUNTERS: tuple[RequestCounter, ...] = (
    RequestCounter("http_requests_total", "code"),
    RequestCounter("http_requests_total", "status"),
    RequestCounter("django_http_responses_total_by_status_total", "status"),
    RequestCounter("http_server_requests_seconds_count", "status"),
    RequestCounter("http_server_request_duration_seconds_count", "http_response_status_code"),
    RequestCounter("nginx_ingress_controller_requests", "status"),
    RequestCounter("nginx_ingress_controller_requests_total", "status"),
)
DEFAULT_LATENCY_HISTOGRAMS: tuple[Scaled, ...] = (
    Scaled("http_request_duration_seconds", 1000.0),
    Scaled("http_request_duration_milliseconds"),
    Scaled("django_http_requests_latency_seconds_by_view_method", 1000.0),
    Scaled("http_server_requests_seconds", 1000.0),
    Scaled("http_server_request_duration_seconds", 1000.0),
    Scaled("nginx_ingress_controller_request_duration_seconds", 1000.0),
)


@dataclass(frozen=True)
class SummaryNames:
    """Which metric names give the summary's two figures, tried in this order."""

    # Gauges that already hold the error rate.
    error_rate: tuple[Scaled, ...] = (
        Scaled("detective_error_rate"),
        Scaled("detective_error_rate_percent", 0.01),
    )
    # Else request counters, split by a label into errors and all.
    request_counters: tuple[RequestCounter, ...] = DEFAULT_REQUEST_COUNTERS
    # Gauges that already hold the p95 latency.
    response_time_p95: tuple[Scaled, ...] = (
        Scaled("detective_response_time_p95_ms"),
        Scaled("detective_response_time_p95_seconds", 1000.0),
    )
    # Else latency histograms by base name (the samples are `<name>_bucket` with `le`).
    latency_histograms: tuple[Scaled, ...] = DEFAULT_LATENCY_HISTOGRAMS
    quantile: float = 0.95

    def with_own(
        self,
        *,
        error_rate: Iterable[Scaled] = (),
        request_counters: Iterable[RequestCounter] = (),
        response_time_p95: Iterable[Scaled] = (),
        latency_histograms: Iterable[Scaled] = (),
    ) -> SummaryNames:
        """These names with a service's own tried first (the defaults stay behind them)."""
        return SummaryNames(
            error_rate=(*error_rate, *self.error_rate),
            request_counters=(*request_counters, *self.request_counters),
            response_time_p95=(*response_time_p95, *self.response_time_p95),
            latency_histograms=(*latency_histograms, *self.latency_histograms),
            quantile=self.quantile,
        )


def summarize(
    samples: Iterable[MetricSampleRecord],
    names: SummaryNames | None = None,
    *,
    start: datetime | None = None,
    end: datetime | None = None,
) -> MetricSummary:
    """The error rate and p95 of the samples inside [start, end] (samples without a timestamp
    always count). A gauge's figure is the mean of its present values; counters and histogram
    buckets count by their increase over the window. Raises MetricValueError on an error rate
    outside 0..1 or a negative p95."""
    names = names or SummaryNames()
    kept = [sample for sample in samples if _inside(sample.timestamp, start, end)]
    origin: dict[str, str] = {}

    error_rate, origin_name = _first_gauge(kept, names.error_rate)
    if error_rate is None:
        error_rate, origin_name = _counter_ratio(kept, names)
    if error_rate is not None and not 0.0 <= error_rate <= 1.0:
        raise MetricValueError(
            f"error_rate from {origin_name} is {error_rate:g}: an error rate is a fraction "
            "between 0 and 1 (a percentage belongs in detective_error_rate_percent)"
        )
    if origin_name and error_rate is not None:
        origin["error_rate"] = origin_name

    p95, origin_name = _first_gauge(kept, names.response_time_p95)
    if p95 is None:
        for histogram in names.latency_histograms:
            value = histogram_quantile(names.quantile, _bucket_increases(kept, histogram.name))
            if value is not None:
                p95, origin_name = value * histogram.factor, f"{histogram.name}_bucket"
                break
    if p95 is not None and p95 < 0:
        raise MetricValueError(f"response_time_p95 from {origin_name} is {p95:g} ms: negative")
    if origin_name and p95 is not None:
        origin["response_time_p95"] = origin_name
    return MetricSummary(error_rate=error_rate, response_time_p95=p95, origin=origin)


def step_series(
    samples: Iterable[MetricSampleRecord], names: SummaryNames | None = None
) -> dict[str, list[float]]:
    """The summary's two figures step by step, in time order, as the metric judge compares
    them: a gauge's values as they are; a request counter's error rate and a histogram's p95
    over each interval between two scrapes (PromQL's `rate()` over one scrape interval, resets
    read as restarts, and `histogram_quantile` of the buckets' increase over it, summed across
    series by `le`). A raw counter or bucket is never a series to compare: its value grows with
    the uptime. Undated samples (one scrape) give no series."""
    names = names or SummaryNames()
    dated = [s for s in samples if s.timestamp is not None and s.value is not None]
    series: dict[str, list[float]] = {}
    rates = _gauge_steps(dated, names.error_rate) or _counter_steps(dated, names)
    if rates:
        series["error_rate"] = rates
    p95 = _gauge_steps(dated, names.response_time_p95)
    for histogram in names.latency_histograms if not p95 else ():
        p95 = _histogram_steps(dated, histogram, names.quantile)
        if p95:
            break
    if p95:
        series["response_time_p95"] = p95
    return series


def _gauge_steps(samples: list[MetricSampleRecord], candidates: tuple[Scaled, ...]) -> list[float]:
    for candidate in candidates:
        points = sorted(
            (s.timestamp, s.value * candidate.factor)
            for s in samples
            if s.name == candidate.name and s.timestamp is not None and s.value is not None
        )
        if points:
            return [value for _, value in points]
    return []


def _steps(points: list[MetricSampleRecord]) -> Iterator[tuple[datetime, float]]:
    """A counter series' growth over each interval, stamped with the interval's end."""
    points = sorted(points, key=lambda point: point.timestamp or datetime.min)
    values = numpy.array([point.value for point in points], dtype=float)
    for point, grown in zip(points[1:], _increments(values), strict=True):
        assert point.timestamp is not None
        yield point.timestamp, float(grown)


def _counter_steps(samples: list[MetricSampleRecord], names: SummaryNames) -> list[float]:
    for counter in names.request_counters:
        pattern = re.compile(counter.error_pattern)
        errors: dict[datetime, float] = defaultdict(float)
        total: dict[datetime, float] = defaultdict(float)
        for labels, points in _series(s for s in samples if s.name == counter.name).items():
            status = dict(labels).get(counter.status_label)
            if status is None:
                continue
            is_error = bool(pattern.fullmatch(status))
            for moment, grown in _steps(points):
                total[moment] += grown
                if is_error:
                    errors[moment] += grown
        rates = [errors[moment] / total[moment] for moment in sorted(total) if total[moment] > 0]
        if rates:
            return rates
    return []


def _histogram_steps(
    samples: list[MetricSampleRecord], histogram: Scaled, quantile: float
) -> list[float]:
    buckets: dict[datetime, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    for labels, points in _series(
        s for s in samples if s.name == f"{histogram.name}_bucket"
    ).items():
        bound = _bound(dict(labels).get("le"))
        if bound is None:
            continue
        for moment, grown in _steps(points):
            buckets[moment][bound] += grown
    values = (histogram_quantile(quantile, dict(buckets[moment])) for moment in sorted(buckets))
    return [value * histogram.factor for value in values if value is not None]


def _bound(text: str | None) -> float | None:
    try:
        return None if text is None else float(text)
    except ValueError:
        return None


def file_release_metrics(
    samples: Iterable[MetricSampleRecord],
    names: SummaryNames | None = None,
    *,
    deploy_time: datetime,
    previous_deploy_time: datetime | None = None,
    length: timedelta = DEFAULT_WINDOW,
) -> ReleaseMetrics:
    """A file's samples split into the release's window and its baseline (the same windows as
    from Prometheus), each with its figures. A sample without a timestamp is a scrape taken for
    the release: it counts in the release's window only."""
    samples = list(samples)
    own = release_window(deploy_time, length)
    base = baseline_window(own, previous_deploy_time)

    def window_of(window: Window, undated: bool) -> WindowMetrics:
        kept = tuple(
            sample
            for sample in samples
            if (sample.timestamp is None and undated)
            or (sample.timestamp is not None and window.start <= sample.timestamp <= window.end)
        )
        return WindowMetrics(window, kept, summarize(kept, names))

    return ReleaseMetrics(release=window_of(own, undated=True), baseline=window_of(base, False))


def _inside(moment: datetime | None, start: datetime | None, end: datetime | None) -> bool:
    if moment is None:
        return True
    return (start is None or moment >= start) and (end is None or moment <= end)


def _first_gauge(
    samples: list[MetricSampleRecord], candidates: tuple[Scaled, ...]
) -> tuple[float | None, str | None]:
    for candidate in candidates:
        values = [s.value for s in samples if s.name == candidate.name and s.value is not None]
        if values:
            return sum(values) / len(values) * candidate.factor, candidate.name
    return None, None


def _series(samples: Iterable[MetricSampleRecord]) -> dict[Labels, list[MetricSampleRecord]]:
    series: dict[Labels, list[MetricSampleRecord]] = defaultdict(list)
    for sample in samples:
        series[sample.labels].append(sample)
    return series


def increase(points: list[MetricSampleRecord]) -> float | None:
    """How much a counter grew over its points: last minus first, a drop read as a reset (the
    counter restarted from zero, as PromQL's `increase` reads it), without PromQL's
    extrapolation to the window's edges. Points without timestamps (one scrape) are taken as
    the count itself. None when no point has a value, or when only one timestamped point lies
    in the window (PromQL has no rate for it either)."""
    present = [point for point in points if point.value is not None]
    if not present:
        return None
    if any(point.timestamp is None for point in present):
        return present[-1].value
    if len(present) < 2:
        return None
    present.sort(key=lambda point: point.timestamp or datetime.min.replace(tzinfo=UTC))
    return float(_increments(numpy.array([point.value for point in present], dtype=float)).sum())


def _increments(values: numpy.ndarray) -> numpy.ndarray:
    """A counter's growth between consecutive points: a drop is a reset (the counter restarted
    from zero), so the growth is the new value, as PromQL's `rate()` and `increase()` read it."""
    steps = numpy.diff(values)
    return numpy.where(steps < 0, values[1:], steps)


def _counter_ratio(
    samples: list[MetricSampleRecord], names: SummaryNames
) -> tuple[float | None, str | None]:
    """Errors over all requests, by each series' increase, from the first request counter
    (by name and status label) that has any."""
    for counter in names.request_counters:
        pattern = re.compile(counter.error_pattern)
        errors = total = 0.0
        seen = False
        for labels, points in _series(s for s in samples if s.name == counter.name).items():
            status = dict(labels).get(counter.status_label)
            grown = increase(points)
            if status is None or grown is None:
                continue
            seen = True
            total += grown
            if pattern.fullmatch(status):
                errors += grown
        if seen and total > 0:
            return errors / total, counter.name
    return None, None


def _bucket_increases(samples: list[MetricSampleRecord], histogram: str) -> dict[float, float]:
    """The histogram's buckets summed by upper bound over all its series (PromQL's
    `sum by (le) (increase(<histogram>_bucket[window]))`)."""
    buckets: dict[float, float] = defaultdict(float)
    for labels, points in _series(s for s in samples if s.name == f"{histogram}_bucket").items():
        bound = dict(labels).get("le")
        grown = increase(points)
        if bound is None or grown is None:
            continue
        try:
            buckets[float(bound)] += grown
        except ValueError:
            continue
    return dict(buckets)


def histogram_quantile(q: float, buckets: dict[float, float]) -> float | None:
    """The q-quantile of a classic histogram given cumulative counts by upper bound, with
    PromQL's `histogram_quantile` interpolation: linear inside the bucket where the rank falls,
    the lowest bucket starting at 0 (when its bound is positive), a rank in the +Inf bucket
    answered with the highest finite bound. None (missing) where PromQL answers NaN: no +Inf
    bucket, fewer than two buckets, no observations, q outside 0..1."""
    if not 0.0 <= q <= 1.0 or math.inf not in buckets or len(buckets) < 2:
        return None
    bounds = sorted(buckets)
    # Counts must not fall as the bound rises; a lower one (scrape skew) is raised, as PromQL does.
    counts: list[float] = []
    for bound in bounds:
        counts.append(max(buckets[bound], counts[-1] if counts else 0.0))
    observations = counts[-1]
    if observations <= 0:
        return None
    rank = q * observations
    index = next(i for i, count in enumerate(counts) if count >= rank)
    if index == len(bounds) - 1:
        return bounds[-2]
    if index == 0 and bounds[0] <= 0:
        return bounds[0]
    start = 0.0 if index == 0 else bounds[index - 1]
    below = 0.0 if index == 0 else counts[index - 1]
    inside = counts[index] - below
    if inside <= 0:
        return None
    return start + (bounds[index] - start) * ((rank - below) / inside)
