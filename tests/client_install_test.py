"""The client installs like any CI tool: from the repository's path into a fresh virtual
environment (uv, as `uvx --from` and `pip install` do it), and the installed `detective`
console script, with nothing of the project on its path, sends a release to the live site and
reads its verdict."""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

import detective_client
from releases.models import Release, Service
from sources import services as sources_services
from sources.models import TestCase
from tests.live_site import LiveSite

pytestmark = pytest.mark.django_db(transaction=True)
PROJECT = Path(__file__).resolve().parents[1]
CLIENT = PROJECT / "detective_client"


def installed_client(root: Path) -> Path:
    """A fresh virtual environment with the client installed from its folder; its `detective`."""
    uv = shutil.which("uv")
    assert uv, "uv is needed to make the test's virtual environment"
    venv = root / "venv"
    environment = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    environment.pop("VIRTUAL_ENV", None)
    subprocess.run([uv, "venv", "-q", str(venv)], check=True, env=environment, cwd=root)
    subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), str(CLIENT)],
        check=True,
        env=environment,
        cwd=root,
        timeout=300,
    )
    return venv / "bin" / "detective"


def test_the_distribution_is_httpx_only_with_a_console_script_and_a_version() -> None:
    meta = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]
    assert [dependency.split(">")[0] for dependency in meta["dependencies"]] == ["httpx"]
    assert meta["scripts"] == {"detective": "detective_client.cli:run"}
    assert meta["version"] == detective_client.__version__


def test_the_installed_client_runs_as_detective_against_the_site(tmp_path: Path) -> None:
    detective = installed_client(tmp_path)
    bare = {"PATH": f"{detective.parent}:/usr/bin:/bin", "HOME": str(tmp_path)}
    shown = subprocess.run(
        [str(detective), "--version"], capture_output=True, text=True, env=bare, cwd=tmp_path
    )
    assert shown.stdout.strip() == f"detective {detective_client.__version__}", shown.stderr
    helped = subprocess.run(
        [str(detective), "--help"], capture_output=True, text=True, env=bare, cwd=tmp_path
    )
    assert helped.returncode == 0 and "{ingest,verdict}" in helped.stdout
    # Not the repository's copy: the one in the virtual environment.
    where = subprocess.run(
        [str(detective.parent / "python"), "-c", "import detective_client as d; print(d.__file__)"],
        capture_output=True, text=True, env=bare, cwd=tmp_path, check=True,
    )  # fmt: skip
    assert where.stdout.startswith(str(tmp_path / "venv"))
    assert not list((tmp_path / "venv").rglob("detective_client/*_test.py"))

    shop = Service.objects.create(name="Shop", slug="shop")
    _, token = sources_services.create_token("CI of shop", shop)
    report = tmp_path / "unit.xml"
    report.write_text(
        '<testsuite name="u" tests="1"><testcase classname="a" name="t"/></testsuite>'
    )
    with LiveSite(tmp_path / "logs", {}) as site:
        environment = {**bare, "DETECTIVE_URL": site.url, "DETECTIVE_TOKEN": token}
        sent = subprocess.run(
            [str(detective), "ingest", "2.0.0", "--service", "shop", "--junit", str(report)],
            capture_output=True, text=True, env=environment, cwd=tmp_path, timeout=120,
        )  # fmt: skip
        assert sent.returncode == 0, sent.stderr + site.log_text()
        assert "stored whole: release shop 2.0.0 created" in sent.stderr
        # A refused file: nothing of that ingestion is stored, and the output says so.
        broken = tmp_path / "broken.xml"
        broken.write_text("<testsuite><oops")
        refused = subprocess.run(
            [str(detective), "ingest", "2.1.0", "--service", "shop", "--junit", str(report),
             str(broken)],
            capture_output=True, text=True, env=environment, cwd=tmp_path, timeout=120,
        )  # fmt: skip
        assert refused.returncode == 1
        assert "stored nothing of shop 2.1.0" in refused.stderr
        assert "Nothing of this ingestion was stored." in refused.stderr
        assert not Release.objects.filter(version="2.1.0").exists()
        summary = tmp_path / "out" / "verdict.md"
        asked = subprocess.run(
            [str(detective), "verdict", "2.0.0", "--service", "shop", "--markdown", str(summary)],
            capture_output=True, text=True, env=environment, cwd=tmp_path, timeout=120,
        )  # fmt: skip
    release = Release.objects.get(service=shop, version="2.0.0")
    assert TestCase.objects.filter(release=release).count() == 1
    # Never assessed and no model: the policy's verdict is the gate's (issue 37), below the
    # default bar (high).
    assert asked.returncode == 0, asked.stdout + asked.stderr
    assert "the policy's verdict (no model assessment)" in asked.stdout + summary.read_text()
