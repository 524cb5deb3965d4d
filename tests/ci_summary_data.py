"""Two releases as a team's CI sends them (a git range, JUnit XML, exporter metrics), for the
CI summary's tests (issue 37, item 9): `clean` (a docs change and a small fix, every test
passing, metrics as before the deploy) and `five_failing` (five commits, each breaking one
function that one test calls)."""

from __future__ import annotations

from pathlib import Path

from releases.models import Release
from tests.ingest_test import git, ingest

DEPLOY = 1795460400  # 2026-11-23T19:00:00Z
DEPLOYED_AT = "2026-11-23T19:00:00+00:00"
SERVICE = "catalog"
FUNCTIONS = ("price", "stock", "discount", "tax", "shipping")


def _module(broken: str | None = None) -> dict[str, str]:
    sources = {}
    for name in FUNCTIONS:
        off = " + 1" if name == broken else ""
        sources[name] = f"def {name}_of(amount):\n    return amount{off}\n"
    return sources


def _repository(repo: Path) -> None:
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "catalog").mkdir()
    (repo / "tests").mkdir()
    (repo / "catalog" / "__init__.py").write_text("")
    for name, text in _module().items():
        (repo / "catalog" / f"{name}.py").write_text(text)
        (repo / "tests" / f"test_{name}.py").write_text(
            f"from catalog.{name} import {name}_of\n\n\n"
            f"def test_{name}_is_kept():\n    assert {name}_of(10) == 10\n"
        )
    (repo / "README.md").write_text("catalog\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "chore: initial")
    git(repo, "tag", "v1.0.0")


def _junit(path: Path, failing: tuple[str, ...]) -> Path:
    cases = []
    for name in FUNCTIONS:
        case = f'<testcase classname="tests.test_{name}" name="test_{name}_is_kept" '
        case += f'file="tests/test_{name}.py" time="0.01"'
        if name in failing:
            cases.append(
                f'{case}><failure message="assert 11 == 10">def test_{name}_is_kept():\n'
                f"&gt;       assert {name}_of(10) == 10\nE       assert 11 == 10\n\n"
                f"tests/test_{name}.py:5: AssertionError</failure></testcase>"
            )
        else:
            cases.append(f"{case}/>")
    for n in range(20):
        cases.append(f'<testcase classname="tests.test_misc" name="test_misc_{n}" time="0.01"/>')
    path.write_text(
        '<?xml version="1.0" encoding="utf-8"?>\n<testsuites><testsuite name="pytest" '
        f'failures="{len(failing)}" tests="{len(cases)}">' + "".join(cases) + "</testsuite>"
        "</testsuites>\n"
    )
    return path


def _metrics(path: Path, start: int) -> Path:
    """prometheus_client's shape, an hour from `start`, a scrape a minute: the same traffic,
    errors and latency whichever hour."""
    lines = [
        "# TYPE http_requests_total counter",
        "# TYPE http_request_duration_seconds histogram",
    ]
    for i in range(61):
        at = (start + 60 * i) * 1000
        lines.append(f'http_requests_total{{code="200"}} {1000 * i} {at}')
        lines.append(f'http_requests_total{{code="500"}} {i} {at}')
        for bucket, share in (("0.1", 0.5), ("0.25", 0.9), ("0.5", 0.99), ("+Inf", 1.0)):
            count = int(1001 * i * share)
            lines.append(f'http_request_duration_seconds_bucket{{le="{bucket}"}} {count} {at}')
        lines.append(f"http_request_duration_seconds_count {1001 * i} {at}")
        lines.append(f"http_request_duration_seconds_sum {100.1 * i} {at}")
    path.write_text("\n".join(lines) + "\n")
    return path


def clean(root: Path) -> Release:
    repo = root / "clean"
    _repository(repo)
    (repo / "README.md").write_text("catalog: prices, stock and shipping\n")
    git(repo, "commit", "-q", "-am", "docs: say what the catalog holds")
    (repo / "catalog" / "__init__.py").write_text('"""The catalog."""\n')
    git(repo, "commit", "-q", "-am", "fix: name the package")
    git(repo, "tag", "v1.1.0")
    ingest(
        "v1.1.0", "--service", SERVICE, "--git-repo", str(repo), "--git-range", "v1.0.0..v1.1.0",
        "--junit", str(_junit(root / "clean.xml", ())), "--deployed-at", DEPLOYED_AT,
        "--metrics-file", str(_metrics(root / "after.prom", DEPLOY)), "--window", "release",
    )  # fmt: skip
    ingest(
        "v1.1.0", "--service", SERVICE, "--window", "baseline",
        "--metrics-file", str(_metrics(root / "before.prom", DEPLOY - 3600)),
    )  # fmt: skip
    return Release.objects.get(version="v1.1.0", service__slug=SERVICE)


def five_failing(root: Path, service: str = SERVICE) -> tuple[Release, dict[str, str]]:
    """The release, and each function's breaking commit (its sha)."""
    repo = root / f"failing-{service}"
    _repository(repo)
    culprits = {}
    for name in FUNCTIONS:
        (repo / "catalog" / f"{name}.py").write_text(_module(broken=name)[name])
        git(repo, "commit", "-q", "-am", f"Round {name} up")
        culprits[name] = git(repo, "rev-parse", "HEAD")
    git(repo, "tag", "v1.2.0")
    ingest(
        "v1.2.0", "--service", service, "--git-repo", str(repo), "--git-range", "v1.0.0..v1.2.0",
        "--junit", str(_junit(root / f"failing-{service}.xml", FUNCTIONS)),
    )  # fmt: skip
    return Release.objects.get(version="v1.2.0", service__slug=service), culprits
