"""Faults (issue 22, item 8): safe defaults, checked the way an operator meets them.

`check --deploy` warns on a wildcard ALLOWED_HOSTS (it passed silently). The weak admin
password refused by `up` and the secret key file narrowed at start are tested beside their
code (`detective_site/management/commands_test.py`, `detective_site/config_test.py`).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from detective_site.checks import WILDCARD_HOSTS
from detective_site.config import BASE_DIR
from tests.live_site import subprocess_environment

PRODUCTION_KEY = "x" * 10 + "a-much-longer-random-secret-key-for-production-0123456789"


@pytest.mark.parametrize(("hosts", "warned"), [("*", True), ("detective.example.com", False)])
def test_check_deploy_says_so(hosts: str, warned: bool) -> None:
    done = subprocess.run(
        [sys.executable, str(BASE_DIR / "manage.py"), "check", "--deploy"],
        cwd=BASE_DIR,
        env=subprocess_environment(
            {
                "DEBUG": "",
                "ALLOWED_HOSTS": hosts,
                "SECRET_KEY": "x" * 10
                + "a-much-longer-random-secret-key-for-production-0123456789",
            }
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (WILDCARD_HOSTS in done.stdout + done.stderr) is warned, done.stdout + done.stderr
