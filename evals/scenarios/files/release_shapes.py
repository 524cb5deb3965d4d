"""The shapes of the scenarios made of files: a release's commits, failures and figures, and
the suite every release runs; `histories.py` holds the scenarios, `make_files.py` writes them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from evals.scenarios.files.otlp_traffic import Traffic

START = datetime(2026, 9, 1, 10, 0, tzinfo=UTC)
WINDOW = timedelta(minutes=30)
STEP = timedelta(seconds=30)

# The suite every release runs: (file, classname, test name). Nothing in a critical area.
COMMON_TESTS = [
    (f"{area}/{module}_test.py", f"{area}.{module}_test", f"test_{case}")
    for area, module, cases in [
        ("catalog", "listing", ["sorts_by_price", "filters_by_brand", "paginates", "shows_stock"]),
        ("catalog", "product", ["renders_gallery", "shows_reviews", "links_related"]),
        ("search", "query", ["matches_prefix", "ignores_case", "ranks_exact_first"]),
        ("search", "suggest", ["debounces_input", "limits_to_ten", "highlights_match"]),
        ("ui", "carousel", ["autoplay_advances", "swipes_on_touch", "stops_on_hover"]),
        ("ui", "forms", ["shows_inline_errors", "keeps_values", "labels_fields"]),
        ("notifications", "email", ["renders_order_shipped", "uses_locale", "plain_text_part"]),
        ("orders", "history", ["lists_newest_first", "filters_by_status", "exports_csv"]),
        ("docs", "links", ["no_dead_links", "anchors_resolve"]),
    ]
    for case in cases
]


@dataclass
class Failure:
    file: str
    classname: str
    name: str
    message: str
    # pytest's error in a fixture: <error message='failed on setup with "..."'>.
    setup: bool = False


@dataclass
class Commit:
    message: str
    files: list[tuple[str, int, int]]  # path, added, deleted
    author: str = "Dana Reyes"
    email: str = "dana@example.com"
    # Files git saw renamed (status R): old path, new path, added, deleted.
    renamed: list[tuple[str, str, int, int]] = field(default_factory=list)
    # path -> the lines changed, `git diff -U0` headers (old_start, old_count, new_start,
    # new_count), as the CI client sends them: what a stack trace's frames are matched to.
    hunks: dict[str, list[tuple[int, int, int, int]]] = field(default_factory=dict)


@dataclass
class Release:
    version: str
    title: str
    commits: list[Commit]
    p95_ms: float
    error_rate: float
    failures: list[Failure] = field(default_factory=list)
    # Failed, then passed on a rerun of the same commit (Surefire's flakyFailure).
    reruns: list[Failure] = field(default_factory=list)
    extra_tests: list[tuple[str, str, str]] = field(default_factory=list)
    samples: int = 61
    baseline_samples: int | None = None  # None: as many as the previous release measured
    total_tests: int | None = None
    # Failed, and failed again on each of Surefire's 2 reruns (rerunFailure).
    rerun_failures: list[Failure] = field(default_factory=list)
    # Tests as Maven Surefire reports them: one TEST-<class>.xml per class, replacing the
    # pytest report of COMMON_TESTS (the release's tests are then `extra_tests` alone).
    surefire: bool = False
    traffic: Traffic | None = None


@dataclass
class Scenario:
    id: str
    releases: list[Release]
