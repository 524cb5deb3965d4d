"""The GitLab CI template (ci/gitlab/detective.gitlab-ci.yml) run as a runner runs a job that
extends it: its variables set (with the client installed from this repository's folder), then
`before_script` and `script` under bash with `-eo pipefail`. With Detective stopped the job
still leaves detective-verdict.md saying so (and the deploy time it took: the job's start),
and exits 3."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest
import yaml

# The template's job against a Detective that is not there: no database, no Redis, the same
# in both of CI's passes.
pytestmark = pytest.mark.backend_independent

PROJECT = Path(__file__).resolve().parents[1]
TEMPLATE = PROJECT / "ci" / "gitlab" / "detective.gitlab-ci.yml"


def test_with_detective_stopped_the_job_leaves_its_summary_and_exits_3(tmp_path: Path) -> None:
    job = yaml.safe_load(TEMPLATE.read_text())[".detective"]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    variables = {name: str(value) for name, value in job["variables"].items()}
    variables |= {
        "CI_COMMIT_TAG": "1.1.0",
        "DETECTIVE_VERSION": "1.1.0",
        "DETECTIVE_CLIENT": str(PROJECT / "detective_client"),
        "DETECTIVE_URL": url,
        "DETECTIVE_TOKEN": "dtk_anything",
        "DETECTIVE_SERVICE": "shop",
        "DETECTIVE_WAIT": "1",
        "CI_JOB_STARTED_AT": "2026-11-29T07:00:00Z",
    }
    environment = {**os.environ, **variables}
    for name in ("VIRTUAL_ENV", "PYTHONPATH", "DJANGO_SETTINGS_MODULE"):
        environment.pop(name, None)
    # The job's venv is /tmp/detective-client in the template; here one of the test's own.
    venv = str(tmp_path / "venv")
    lines = [line.replace("/tmp/detective-client", venv) for line in job["before_script"]]
    lines += [line.replace("/tmp/detective-client", venv) for line in job["script"]]
    script = tmp_path / "job.sh"
    script.write_text("\n".join(lines))
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        capture_output=True, text=True, env=environment, cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    summary = (tmp_path / "detective-verdict.md").read_text()
    assert f"**What to do:** Detective did not answer at {url}" in summary
    assert "**Sending the release failed (exit 1)**" in summary
    # No DETECTIVE_DEPLOYED_AT: the job's start, said as such.
    assert (
        "- **Deploy time:** 2026-11-29T07:00:00Z, this job's start time "
        "(DETECTIVE_DEPLOYED_AT not set)"
    ) in summary
    assert summary.splitlines()[0] in done.stdout  # shown in the job's log too
    assert job["artifacts"] == {
        "when": "always",
        "paths": ["detective-verdict.md"],
        "expose_as": "Detective verdict",
    }
