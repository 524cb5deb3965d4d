"""The demo's releases written as their pipelines would have them: a git repository per service
(made with the `git` command, one commit per change, a tag per release; the demo shop's commits
write its real code, `demo_shop`), a JUnit XML report
and an OpenMetrics file per release. `seed_demo` ingests these through `sources.services`, the
path a user's own files take.

Everything is derived from `sources.demo_releases` and the time the seed runs, deterministically
(the same demo gives the same files), so that the summaries the ingestion derives say what the
demo's figures say: the counts, the failing tests by name, the error rate and p95 of each
release's window, and the previous release's figures as its baseline.
"""

from __future__ import annotations

import math
import os
import random
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

from django.utils.text import slugify

import demo_shop
from risk.changes import subject_areas
from risk.settings import DEFAULT_CRITICAL_AREAS
from sources.demo_releases import DemoRelease
from sources.parsers.windows import DEFAULT_WINDOW

# The release is deployed an hour after it is cut; its metrics window is DEFAULT_WINDOW long.
DEPLOY_DELAY = timedelta(hours=1)
SAMPLES_PER_WINDOW = 30
AUTHORS = [
    ("Ada Lovelace", "ada@shop.example"),
    ("Grace Hopper", "grace@shop.example"),
    ("Katherine Johnson", "katherine@shop.example"),
    ("Alan Turing", "alan@shop.example"),
]
START_TAG = "demo-start"
# PNG's signature and a few bytes: git counts the file as binary.
BINARY = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10\x00\x00\x00\x10\x08\x06\x00\x00"


class GitMissing(RuntimeError):
    pass


@dataclass(frozen=True)
class DemoFiles:
    """What the pipeline of one release would send (None: that source was never sent)."""

    created_at: datetime
    deployed_at: datetime
    repo: Path
    git_range: str | None
    junit: Path | None
    metrics: Path | None


def service_slug(demo: DemoRelease) -> str:
    return slugify(demo.service) if demo.service else "default"


def write_all(directory: Path, demos: Sequence[DemoRelease], now: datetime) -> dict[str, DemoFiles]:
    """Every demo release's files under `directory`, by `key(demo)`. Raises GitMissing."""
    if shutil.which("git") is None:
        raise GitMissing(
            "git is not installed: the demo's releases are ingested from a git repository "
            "made on the fly (apt-get install git, then run seed_demo again)."
        )
    files: dict[str, DemoFiles] = {}
    by_service: dict[str, list[DemoRelease]] = {}
    for demo in demos:
        by_service.setdefault(service_slug(demo), []).append(demo)
    for slug, history in by_service.items():
        ordered = sorted(history, key=lambda d: -d.days_ago)
        files.update(_service_files(directory / slug, ordered, now))
    return files


def key(demo: DemoRelease) -> str:
    return f"{service_slug(demo)}/{demo.version}"


def _service_files(
    directory: Path, history: Sequence[DemoRelease], now: datetime
) -> dict[str, DemoFiles]:
    repo = directory / "repo"
    repo.mkdir(parents=True)
    git = _Git(repo)
    first_cut = now - timedelta(days=history[0].days_ago)
    git.init(first_cut - timedelta(days=10))
    files: dict[str, DemoFiles] = {}
    previous_tag = START_TAG
    previous: tuple[DemoRelease, datetime] | None = None
    for number, demo in enumerate(history):
        created_at = now - timedelta(days=demo.days_ago)
        deployed_at = created_at + DEPLOY_DELAY
        git_range = None
        if demo.changes:
            for index, message in enumerate(demo.changes):
                moment = created_at - timedelta(hours=2 * (len(demo.changes) - index))
                seed = number * 10 + index
                if demo.shop_code:
                    git.commit_files(message, moment, seed, demo_shop.files_of(demo.version))
                else:
                    git.commit(message, moment, seed)
            git_range = f"{previous_tag}..{demo.version}"
        git.tag(demo.version)
        base = directory / demo.version
        base.mkdir()
        junit = None
        if demo.test_results is not None and not demo.by_hand:
            junit = base / "junit.xml"
            junit.write_text(junit_xml(demo), encoding="utf-8")
        metrics = None
        if demo.deployment_metrics is not None and not demo.by_hand:
            metrics = base / "metrics.om"
            metrics.write_text(openmetrics(demo, deployed_at, previous), encoding="utf-8")
        files[key(demo)] = DemoFiles(
            created_at=created_at,
            deployed_at=deployed_at,
            repo=repo,
            git_range=git_range,
            junit=junit,
            metrics=metrics,
        )
        previous_tag, previous = demo.version, (demo, deployed_at)
    return files


class _Git:
    """The `git` command on one repository, with no user or system configuration."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(repo),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "LC_ALL": "C",
        }

    def run(self, *args: str, env: dict[str, str] | None = None) -> str:
        done = subprocess.run(
            ["git", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false", *args],
            cwd=self.repo,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.strip()

    def init(self, moment: datetime) -> None:
        self.run("init", "-q", "-b", "main")
        (self.repo / "README.md").write_text("# The demo's service\n", encoding="utf-8")
        # The code a later "Moved ..." commit moves (a rename in git's eyes).
        (self.repo / "src").mkdir()
        legacy = [f"LEGACY_{n} = {n}" for n in range(40)]
        (self.repo / "src" / "cart.py").write_text("\n".join(legacy) + "\n", encoding="utf-8")
        self.run("add", "-A")
        self._commit("chore: initial import", moment, AUTHORS[0])
        self.tag(START_TAG)

    def commit(self, message: str, moment: datetime, seed: int) -> None:
        """One commit of this change: its scope's module grows (and loses a few lines), its
        test file is added; a move renames a file, buttons bring an image."""
        scope = _scope(message)
        folder = _folder(message)
        module = self.repo / folder / f"{scope}.py"
        module.parent.mkdir(parents=True, exist_ok=True)
        subject = message.split(": ", 1)[-1].lower()
        moved = subject.startswith("moved")
        old = module.read_text(encoding="utf-8").splitlines() if module.exists() else []
        # A move keeps the code (so that git sees a rename); a change rewrites a quarter.
        kept = old if moved else old[: len(old) * 3 // 4]
        added = [f"# {message[:60]} ({seed}.{line})" for line in range(8 + seed % 23)]
        module.write_text("\n".join([*kept, *added[: 2 if moved else None]]) + "\n", "utf-8")
        tests = self.repo / "tests" / scope / f"test_change_{seed}.py"
        tests.parent.mkdir(parents=True, exist_ok=True)
        tests.write_text(f"def test_change_{seed}():\n    assert True\n", encoding="utf-8")
        if moved:
            self.run("add", "-A")
            self.run("mv", f"{folder}/{scope}.py", f"{folder}/{scope}_server.py")
        if "buttons" in subject:
            image = self.repo / "static" / f"{scope}.png"
            image.parent.mkdir(parents=True, exist_ok=True)
            image.write_bytes(BINARY + bytes([seed % 256]))
        self.run("add", "-A")
        self._commit(message, moment, AUTHORS[seed % len(AUTHORS)])

    def commit_files(
        self, message: str, moment: datetime, seed: int, files: dict[str, str]
    ) -> None:
        """One commit writing these files (path -> text): the demo shop's real code."""
        for relative, text in files.items():
            target = self.repo / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        self.run("add", "-A")
        self._commit(message, moment, AUTHORS[seed % len(AUTHORS)])

    def _commit(self, message: str, moment: datetime, author: tuple[str, str]) -> None:
        stamp = moment.isoformat()
        name, email = author
        identity = {
            "GIT_AUTHOR_NAME": name,
            "GIT_AUTHOR_EMAIL": email,
            "GIT_AUTHOR_DATE": stamp,
            "GIT_COMMITTER_NAME": name,
            "GIT_COMMITTER_EMAIL": email,
            "GIT_COMMITTER_DATE": stamp,
        }
        self.run("commit", "-q", "-m", message, env=identity)

    def tag(self, name: str) -> None:
        self.run("tag", name)


def _folder(message: str) -> str:
    """Where a commit's code lies: a change in a critical area is in that area's folder
    ("feat(cards): Card data is tokenised by the payment provider" -> src/payments), since the
    policy reads a commit's area from its files, not its words."""
    areas = subject_areas(message.split("\n", 1)[0], DEFAULT_CRITICAL_AREAS)
    scope = _scope(message)
    if scope in DEFAULT_CRITICAL_AREAS or not areas:
        return f"src/{scope}" if scope in DEFAULT_CRITICAL_AREAS else "src"
    return f"src/{areas[0]}"


def _scope(message: str) -> str:
    header = message.split(":", 1)[0]
    if "(" in header:
        return slugify(header.split("(", 1)[1].split(")", 1)[0]) or "app"
    return "app"


# ---- JUnit XML ---------------------------------------------------------------------------------


def junit_xml(demo: DemoRelease) -> str:
    """pytest's shape (one `testsuite` in `testsuites`, the module path as classname), with the
    release's counts: its failing tests by name (more made up when the count is higher), its
    skipped and its passing ones."""
    results: dict[str, Any] = demo.test_results or {}
    passed, failed, skipped = results["passed"], results["failed"], results["skipped"]
    failing = list(results.get("failing_tests", []))
    area = failing[0].split("/", 1)[0] if failing else "app"
    failing += [f"{area}/regression_test::test_case_{n}" for n in range(failed - len(failing))]
    rng = random.Random(f"{demo.service}/{demo.version}")
    modules = ["api", "cart", "checkout", "orders", "settings", "search", "auth", "emails"]
    cases = []
    for name in failing:
        classname, _, test = name.rpartition("::")
        message = f"AssertionError: {test} expected the result of {demo.version}'s change"
        cases.append(
            _case(classname, test, rng.uniform(0.05, 2.0))
            + f"<failure message={quoteattr(message)}>{_escape(message)}\n"
            f"{classname}.py:{rng.randint(20, 400)}: AssertionError</failure></testcase>"
        )
    for n in range(skipped):
        module = modules[n % len(modules)]
        cases.append(
            _case(f"{module}/slow_test", f"test_external_{n}", 0.0)
            + '<skipped message="needs the sandbox payment provider"/></testcase>'
        )
    for n in range(passed):
        module = modules[n % len(modules)]
        cases.append(
            _case(f"{module}/{module}_test", f"test_behaviour_{n:04d}", rng.uniform(0.001, 0.4))
            + "</testcase>"
        )
    total = passed + failed + skipped
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n<testsuites>'
        f'<testsuite name="pytest" errors="0" failures="{failed}" skipped="{skipped}" '
        f'tests="{total}" time="{total * 0.05:.1f}">\n'
        + "\n".join(cases)
        + "\n</testsuite></testsuites>\n"
    )


def _case(classname: str, name: str, seconds: float) -> str:
    return (
        f'<testcase classname={quoteattr(classname)} name={quoteattr(name)} time="{seconds:.3f}">'
    )


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# ---- OpenMetrics -------------------------------------------------------------------------------


def openmetrics(
    demo: DemoRelease, deployed_at: datetime, previous: tuple[DemoRelease, datetime] | None
) -> str:
    """The release's window and, with a previous release that had metrics, that release's
    window as its baseline (else its own figures a week earlier): per-minute samples around
    each figure, and the figure over the whole window as `<name>:window` (what a recording
    rule gives; the summary reads it first). A missing figure is NaN."""
    families: dict[str, list[str]] = {}
    windows = [(demo, deployed_at, "")]
    if previous is not None and previous[0].deployment_metrics is not None:
        windows.insert(0, (*previous, ""))
    elif demo.deployment_metrics is not None:
        # A service's first release: its baseline is the same window a week earlier (what
        # ran before it behaved as it does), so that the judge has a baseline to read.
        windows.insert(0, (demo, deployed_at - timedelta(days=7), "/a week earlier"))
    for owner, start, seed in windows:
        figures = owner.deployment_metrics or {}
        rng = random.Random(f"{owner.service}/{owner.version}/metrics{seed}")
        step = DEFAULT_WINDOW / SAMPLES_PER_WINDOW
        for name, value in figures.items():
            lines = families.setdefault(name, [])
            figure = families.setdefault(f"{name}:window", [])
            for n in range(SAMPLES_PER_WINDOW):
                # Mid-step, so that rounding to the second keeps each inside its window.
                moment = (start + step * (n + 0.5)).timestamp()
                noisy = None if value is None else value * (1 + rng.uniform(-0.08, 0.08))
                lines.append(f"{name} {_number(noisy)} {moment:.0f}")
            end = (start + step * (SAMPLES_PER_WINDOW - 0.5)).timestamp()
            figure.append(f"{name}:window {_number(value)} {end:.0f}")
    text = []
    for name, lines in families.items():
        text.append(f"# TYPE {name} gauge")
        text.extend(lines)
    return "\n".join([*text, "# EOF"]) + "\n"


def _number(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "NaN"
    return repr(float(value))
