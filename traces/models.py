"""What is kept of a service's OTLP traces: figures per route and minute, and error groups with
their counts; never a span (docs/using/errors-and-traces.md says what and for how long)."""

from __future__ import annotations

from django.db import models

from releases.models import Release, Service


class Window(models.TextChoices):
    BASELINE = "baseline", "Before the deploy time"
    RELEASE = "release", "Since the deploy time"


class RouteMinute(models.Model):
    """A route's requests in one minute of one release: how many, how many failed, and their
    latency as a DDSketch (protobuf bytes, mergeable across minutes)."""

    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="route_minutes")
    route = models.CharField(max_length=200)
    minute = models.DateTimeField()
    window = models.CharField(max_length=8, choices=Window.choices)
    requests = models.PositiveIntegerField(default=0)
    errors = models.PositiveIntegerField(default=0)
    sketch = models.BinaryField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["release", "route", "minute", "window"], name="route_minute_once"
            )
        ]

    def __str__(self) -> str:
        return f"{self.route} at {self.minute:%Y-%m-%d %H:%M} ({self.window})"


class ErrorGroup(models.Model):
    """Occurrences of one exception of a service grouped by their fingerprint (the exception
    type and its in-app frames' modules and functions): a sample of the first seen."""

    service = models.ForeignKey(Service, on_delete=models.CASCADE, related_name="error_groups")
    fingerprint = models.CharField(max_length=32)
    exception_type = models.CharField(max_length=200)
    message = models.TextField(blank=True)
    stacktrace = models.TextField(blank=True)
    # The in-app frames, outermost first: [path, line, function].
    frames = models.JSONField(default=list)
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    first_release = models.ForeignKey(
        Release, on_delete=models.SET_NULL, null=True, related_name="+"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["service", "fingerprint"], name="error_group_once")
        ]

    def __str__(self) -> str:
        return f"{self.exception_type} ({self.fingerprint[:8]})"


class ErrorRelease(models.Model):
    """An error group in one release: when, and a few traces to look at."""

    group = models.ForeignKey(ErrorGroup, on_delete=models.CASCADE, related_name="releases")
    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="error_groups")
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    exemplars = models.JSONField(default=list)
    # A few of the exemplar traces with their spans of this release (`traces.otlp.samples`):
    # [{trace_id, spans: [{span_id, parent_span_id, name, kind, start_ms, duration_ms, status,
    # error, exception}], spans_seen}], bounded there.
    sample_traces = models.JSONField(default=list)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["group", "release"], name="error_release_once")
        ]

    def __str__(self) -> str:
        return f"{self.group_id} in release {self.release_id}"


class ErrorMinute(models.Model):
    group = models.ForeignKey(ErrorGroup, on_delete=models.CASCADE, related_name="minutes")
    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="error_minutes")
    route = models.CharField(max_length=200, blank=True)
    minute = models.DateTimeField()
    window = models.CharField(max_length=8, choices=Window.choices)
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["group", "release", "route", "minute", "window"],
                name="error_minute_once",
            )
        ]

    def __str__(self) -> str:
        return f"{self.count} of {self.group_id} at {self.minute:%Y-%m-%d %H:%M}"


class TraceIntake(models.Model):
    """What a release's spans came to, and what its caps dropped."""

    release = models.OneToOneField(Release, on_delete=models.CASCADE, related_name="trace_intake")
    spans = models.PositiveBigIntegerField(default=0)
    # Log records with an exception (`/otlp/v1/logs`): occurrences of error groups, no requests.
    log_records = models.PositiveBigIntegerField(default=0)
    routes_dropped = models.PositiveBigIntegerField(default=0)
    groups_dropped = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.spans} spans of release {self.release_id}"


class HeldVersion(models.Model):
    """Spans of a service's version that has no release yet, folded as they arrived and kept
    until the release is sent (then merged into it and deleted) or `expires_at` passes. The
    deploy time is not known yet, so the window (baseline or release) is decided per minute on
    arrival of the release."""

    service = models.ForeignKey(Service, on_delete=models.CASCADE, related_name="held_versions")
    version = models.CharField(max_length=100)
    held_since = models.DateTimeField()
    expires_at = models.DateTimeField(db_index=True)
    spans = models.PositiveBigIntegerField(default=0)
    log_records = models.PositiveBigIntegerField(default=0)
    # Route minutes and error groups' (route, minute) counts held: what the service's cap counts.
    rows = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["service", "version"], name="held_version_once")
        ]

    def __str__(self) -> str:
        return f"{self.spans} spans of {self.version} held"


class HeldRouteMinute(models.Model):
    held = models.ForeignKey(HeldVersion, on_delete=models.CASCADE, related_name="routes")
    route = models.CharField(max_length=200)
    minute = models.DateTimeField()
    requests = models.PositiveIntegerField(default=0)
    errors = models.PositiveIntegerField(default=0)
    sketch = models.BinaryField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["held", "route", "minute"], name="held_route_once")
        ]

    def __str__(self) -> str:
        return f"{self.route} at {self.minute:%Y-%m-%d %H:%M} (held)"


class HeldError(models.Model):
    """An error group's occurrences in a held version: its sample, and its counts as
    [[route, minute since the epoch, count], ...]."""

    held = models.ForeignKey(HeldVersion, on_delete=models.CASCADE, related_name="errors")
    fingerprint = models.CharField(max_length=32)
    exception_type = models.CharField(max_length=200)
    message = models.TextField(blank=True)
    stacktrace = models.TextField(blank=True)
    frames = models.JSONField(default=list)
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    counts = models.JSONField(default=list)
    exemplars = models.JSONField(default=list)
    sample_traces = models.JSONField(default=list)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["held", "fingerprint"], name="held_error_once")
        ]

    def __str__(self) -> str:
        return f"{self.exception_type} (held)"
