"""Write the files of the scenarios made of files: JUnit XML, commits, OpenMetrics text, and
for some the running version's spans as its OTLP exporter sends them (OTLP/JSON).
The scenarios themselves are data in `histories.py`, their shapes in `release_shapes.py`.

    uv run python -m evals.scenarios.files.make_files

Plain Python, deterministic (seeded noise, fixed times, commit SHAs hashed from their
content): running it again writes the same bytes, so a diff in the files is a change of this
script. The files are committed; this script is how they were made and how to change them.
After a change, bump `suite_version` in `evals/scenarios/suite.toml`.

Each scenario is a service's releases in deploy order, the last one under test. Every
release's metrics file holds the previous release's window (its baseline) and its own (30
minutes from its deploy), one gauge sample every 30 seconds, as an export of both windows
from a monitoring system would.

The spans (OTLP/JSON) are written by `otlp_traffic.py` beside it.
"""

from __future__ import annotations

import hashlib
import json
import random
from datetime import datetime, timedelta
from pathlib import Path
from xml.sax.saxutils import quoteattr

from evals.scenarios.files.histories import SCENARIOS
from evals.scenarios.files.otlp_traffic import otlp_json
from evals.scenarios.files.release_shapes import COMMON_TESTS, START, STEP, Release, Scenario

HERE = Path(__file__).resolve().parent
# What the writers write (`write`, `SCENARIOS`) is read from here by the suite's tests.
__all__ = ["SCENARIOS", "write"]


def _sha(*parts: str) -> str:
    return hashlib.sha1("\0".join(parts).encode()).hexdigest()


def junit_xml(release: Release) -> str:
    if release.total_tests == 0:
        # The CI job ran and its report holds no test at all.
        return '<?xml version="1.0" encoding="UTF-8"?>\n<testsuites tests="0"/>\n'
    failing = {(f.classname, f.name): f for f in release.failures}
    rerun = {(f.classname, f.name): f for f in release.reruns}
    tests = COMMON_TESTS + release.extra_tests
    lines = ['<?xml version="1.0" encoding="UTF-8"?>', "<testsuites>"]
    by_file: dict[str, list[tuple[str, str, str]]] = {}
    for test in tests:
        by_file.setdefault(test[0], []).append(test)
    rng = random.Random(release.version)
    for file, cases in by_file.items():
        suite = file.removesuffix(".py").replace("/", ".")
        failures = sum((c[1], c[2]) in failing for c in cases)
        lines.append(
            f'  <testsuite name={quoteattr(suite)} tests="{len(cases)}" '
            f'failures="{failures}" errors="0" skipped="0" file={quoteattr(file)}>'
        )
        for _, classname, name in cases:
            seconds = f"{rng.uniform(0.01, 0.9):.3f}"
            attrs = (
                f"classname={quoteattr(classname)} name={quoteattr(name)} "
                f'file={quoteattr(file)} time="{seconds}"'
            )
            failure = failing.get((classname, name))
            flaky = rerun.get((classname, name))
            if flaky is not None:
                lines.append(f"    <testcase {attrs}>")
                lines.append(
                    f'      <flakyFailure type="AssertionError" message={quoteattr(flaky.message)}'
                    "/>"
                )
                lines.append("    </testcase>")
                continue
            if failure is None:
                lines.append(f"    <testcase {attrs}/>")
                continue
            lines.append(f"    <testcase {attrs}>")
            if failure.setup:
                # As pytest 8/9 write a fixture's exception (the test itself never ran).
                message = f'failed on setup with "{failure.message}"'
                lines.append(
                    f"      <error message={quoteattr(message)}>{_escape(failure.message)}</error>"
                )
            else:
                lines.append(
                    f'      <failure type="AssertionError" message={quoteattr(failure.message)}>'
                    f"{failure.message}</failure>"
                )
            lines.append("    </testcase>")
        lines.append("  </testsuite>")
    lines.append("</testsuites>")
    return "\n".join(lines) + "\n"


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


SUREFIRE_HEAD = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<testsuite '
    'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
    'xsi:noNamespaceSchemaLocation="https://maven.apache.org/surefire/maven-surefire-plugin/xsd/'
    'surefire-test-report-3.0.xsd" version="3.0"'
)


def surefire_reports(release: Release) -> dict[str, str]:
    """Maven Surefire 3's TEST-<class>.xml per test class, as `mvn test` with
    `-Dsurefire.rerunFailingTestsCount=2` writes them: a test that failed then passed has a
    flakyFailure; one that failed on every run, its failure and a rerunFailure per rerun."""
    failing = {(f.classname, f.name): f for f in release.failures}
    flaky = {(f.classname, f.name): f for f in release.reruns}
    rerun = {(f.classname, f.name): f for f in release.rerun_failures}
    by_class: dict[str, list[str]] = {}
    for _, classname, name in release.extra_tests:
        by_class.setdefault(classname, []).append(name)
    rng = random.Random(f"surefire {release.version}")
    reports = {}
    for classname, names in by_class.items():
        cases, counts = [], {"failures": 0, "flakes": 0}
        simple = classname.rsplit(".", 1)[-1]
        for name in names:
            key = (classname, name)
            attrs = f'name="{name}" classname="{classname}" time="{rng.uniform(0.01, 0.9):.3f}"'
            failure = failing.get(key) or rerun.get(key)
            if key in flaky:
                counts["flakes"] += 1
                message = flaky[key].message
                cases += [
                    f"  <testcase {attrs}>",
                    f'    <flakyFailure message={quoteattr(message)} type="'
                    'org.opentest4j.AssertionFailedError">',
                    f"      <stackTrace><![CDATA[org.opentest4j.AssertionFailedError: {message}",
                    f"\tat {classname}.{name}({simple}.java:{40 + len(name)})",
                    "]]></stackTrace>",
                    "    </flakyFailure>",
                    "  </testcase>",
                ]
            elif failure is not None:
                counts["failures"] += 1
                trace = (
                    f"org.opentest4j.AssertionFailedError: {failure.message}\n"
                    f"\tat {classname}.{name}({simple}.java:{40 + len(name)})\n"
                )
                kind = 'type="org.opentest4j.AssertionFailedError"'
                cases += [
                    f"  <testcase {attrs}>",
                    f"    <failure message={quoteattr(failure.message)} {kind}>"
                    f"<![CDATA[{trace}]]></failure>",
                ]
                if key in rerun:
                    for _ in range(2):
                        cases += [
                            f"    <rerunFailure message={quoteattr(failure.message)} {kind}>",
                            f"      <stackTrace><![CDATA[{trace}]]></stackTrace>",
                            "    </rerunFailure>",
                        ]
                cases.append("  </testcase>")
            else:
                cases.append(f"  <testcase {attrs}/>")
        flakes = f' flakes="{counts["flakes"]}"' if counts["flakes"] else ""
        reports[f"TEST-{classname}.xml"] = (
            "\n".join(
                [
                    f'{SUREFIRE_HEAD} name="{classname}" time="{rng.uniform(0.5, 3):.3f}" '
                    f'tests="{len(names)}" errors="0" skipped="0" failures="{counts["failures"]}"'
                    f"{flakes}>",
                    *cases,
                    "</testsuite>",
                ]
            )
            + "\n"
        )
    return reports


def commits_json(release: Release, deployed_at: datetime, parent: str | None) -> str:
    records = []
    for index, commit in enumerate(release.commits):
        authored = deployed_at - timedelta(hours=len(release.commits) - index + 1)
        sha = _sha(release.version, str(index), commit.message)
        records.append(
            {
                "sha": sha,
                "author_name": commit.author,
                "author_email": commit.email,
                "authored_at": authored.isoformat(),
                "message": commit.message,
                "files": [
                    {"path": path, "old_path": None, "added": added, "deleted": deleted}
                    | (
                        {"hunks": [list(h) for h in commit.hunks[path]]}
                        if path in commit.hunks
                        else {}
                    )
                    for path, added, deleted in commit.files
                ]
                + [
                    {"path": new, "old_path": old, "added": added, "deleted": deleted}
                    for old, new, added, deleted in commit.renamed
                ],
                "parents": [parent] if parent else [],
            }
        )
        parent = sha
    return json.dumps(records, indent=1) + "\n"


def _series(
    rng: random.Random, start: datetime, count: int, p95: float, errors: float
) -> list[tuple[float, float, float]]:
    return [
        (
            (start + STEP * i).timestamp(),
            round(p95 * rng.uniform(0.9, 1.1), 1),
            round(max(0.0, errors * rng.uniform(0.8, 1.2)), 5),
        )
        for i in range(count)
    ]


def openmetrics(
    release: Release,
    deployed_at: datetime,
    previous: tuple[Release, datetime] | None,
) -> str:
    rng = random.Random(f"metrics {release.version}")
    points = []
    if previous is not None:
        before, at = previous
        count = release.baseline_samples if release.baseline_samples is not None else before.samples
        points += _series(rng, at + STEP / 2, count, before.p95_ms, before.error_rate)
    points += _series(
        rng, deployed_at + STEP / 2, release.samples, release.p95_ms, release.error_rate
    )
    lines = ["# TYPE detective_response_time_p95_ms gauge"]
    lines += [f"detective_response_time_p95_ms {p95} {stamp:.3f}" for stamp, p95, _ in points]
    lines.append("# TYPE detective_error_rate gauge")
    lines += [f"detective_error_rate {errors} {stamp:.3f}" for stamp, _, errors in points]
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def write(scenario: Scenario, root: Path = HERE) -> list[str]:
    """Write one scenario's files under `root`; the TOML lines naming them (its scenario
    file's `[[sources.releases]]`)."""
    directory = root / scenario.id
    directory.mkdir(parents=True, exist_ok=True)
    toml: list[str] = []
    parent: str | None = None
    previous: tuple[Release, datetime] | None = None
    for index, release in enumerate(scenario.releases):
        deployed_at = START + timedelta(days=7 * index)
        stem = release.version
        if release.surefire:
            reports = [f"surefire-reports/{stem}/{name}" for name in surefire_reports(release)]
            (directory / "surefire-reports" / stem).mkdir(parents=True, exist_ok=True)
            for name, text in surefire_reports(release).items():
                (directory / "surefire-reports" / stem / name).write_text(text, encoding="utf-8")
        else:
            reports = [f"{stem}.junit.xml"]
            (directory / f"{stem}.junit.xml").write_text(junit_xml(release), encoding="utf-8")
        commits = commits_json(release, deployed_at, parent)
        (directory / f"{stem}.commits.json").write_text(commits, encoding="utf-8")
        # A rebuild (no commit in its range) keeps the previous release's head.
        parent = json.loads(commits)[-1]["sha"] if release.commits else parent
        metrics = openmetrics(release, deployed_at, previous)
        (directory / f"{stem}.metrics.txt").write_text(metrics, encoding="utf-8")
        previous = (release, deployed_at)
        toml += [
            "[[sources.releases]]",
            f'version = "{release.version}"',
            f"deployed_at = {deployed_at.strftime('%Y-%m-%dT%H:%M:%SZ')}",
            f"title = {json.dumps(release.title)}",
            "junit = [" + ", ".join(f'"{name}"' for name in reports) + "]",
            f'commits = "{stem}.commits.json"',
            f'metrics = "{stem}.metrics.txt"',
        ]
        if release.traffic is not None:
            traces = otlp_json(release.version, release.traffic, deployed_at)
            (directory / f"{stem}.traces.json").write_text(traces, encoding="utf-8")
            toml.append(f'traces = "{stem}.traces.json"')
        toml.append("")
    return toml


def main() -> None:
    """Write every scenario's files and print the TOML that names them."""
    for scenario in SCENARIOS:
        print(f"# {scenario.id}.toml\n" + "\n".join(write(scenario)))


if __name__ == "__main__":
    main()
