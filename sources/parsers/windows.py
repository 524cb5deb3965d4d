"""A release's windows and what is read in them; shared by the Prometheus client and the file
reader (plain Python).

The release's window starts at its deploy time (`DEFAULT_WINDOW` long unless told). The
baseline is the previous release's window (as long as this one's, cut where this release was
deployed) or, with no previous release, the same window a week earlier.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sources.parsers.records import MetricSampleRecord, MetricSummary

DEFAULT_WINDOW = timedelta(minutes=30)
BASELINE_OFFSET = timedelta(weeks=1)


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime

    @property
    def length(self) -> timedelta:
        return self.end - self.start


def release_window(deploy_time: datetime, length: timedelta = DEFAULT_WINDOW) -> Window:
    """The release's own window: from its deploy time, `length` long."""
    return Window(deploy_time, deploy_time + length)


def baseline_window(release: Window, previous_deploy_time: datetime | None = None) -> Window:
    """The previous release's window (as long as this one's, but never past this deploy), or
    with no previous release, this window a week earlier."""
    if previous_deploy_time is not None and previous_deploy_time < release.start:
        end = min(previous_deploy_time + release.length, release.start)
        return Window(previous_deploy_time, end)
    return Window(release.start - BASELINE_OFFSET, release.end - BASELINE_OFFSET)


@dataclass(frozen=True)
class WindowMetrics:
    window: Window
    # From Prometheus: range-query samples named by summary key (`error_rate`,
    # `response_time_p95` in ms). From a file: the file's samples inside the window.
    samples: tuple[MetricSampleRecord, ...]
    summary: MetricSummary


@dataclass(frozen=True)
class ReleaseMetrics:
    release: WindowMetrics
    baseline: WindowMetrics

    def deployment_metrics(self) -> dict[str, float]:
        """The summary's `deployment_metrics`: the release's figures and, as `<key>_baseline`,
        the baseline's; missing ones left out."""
        figures = self.release.summary.as_dict()
        for key, value in self.baseline.summary.as_dict().items():
            figures[f"{key}_baseline"] = value
        return figures
