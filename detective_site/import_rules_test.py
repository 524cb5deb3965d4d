"""The house's import directions, over the whole tree, and the check itself on small trees made
to break them."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from detective_site import import_rules
from detective_site.import_rules import ROOMS, circles, graph, violations

PROJECT = Path(__file__).resolve().parents[1]
LONG = 600
LIMIT = 700


def tree(root: Path, files: dict[str, str]) -> Path:
    """A project of these modules (packages get their `__init__.py`)."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        for package in path.relative_to(root).parents:
            if package != Path("."):
                (root / package / "__init__.py").touch()
        path.write_text(textwrap.dedent(text))
    return root


# ---- the project -------------------------------------------------------------------------------


def test_every_module_imports_only_in_the_allowed_directions() -> None:
    problems = violations(PROJECT)
    assert problems == [], "\n".join(str(problem) for problem in problems)


def test_no_module_is_part_of_an_import_circle() -> None:
    assert circles(graph(PROJECT)) == []


def test_a_module_over_600_lines_says_why_at_its_top() -> None:
    # Not an import rule, but the same map's other promise: rooms cut to size.
    unexplained = [
        f"{path.relative_to(PROJECT)}: {len(lines)} lines"
        for path in import_rules.modules(PROJECT).values()
        if len(lines := path.read_text(encoding="utf-8").splitlines()) > LONG
        and not any(line.startswith("Over 600 lines") for line in lines[:5])
    ]
    assert unexplained == []


def test_no_module_is_over_700_lines() -> None:
    # The house's hard limit (issue 31): past it a module is cut along what it does, a line at
    # its top is not enough.
    over = [
        f"{path.relative_to(PROJECT)}: {length} lines"
        for path in import_rules.modules(PROJECT).values()
        if (length := len(path.read_text(encoding="utf-8").splitlines())) > LIMIT
    ]
    assert over == []


def test_the_architecture_page_maps_every_room() -> None:
    page = (PROJECT / "docs" / "developing" / "architecture.md").read_text(encoding="utf-8")
    where = page.split("## Where things are", 1)[1].split("\n## ", 1)[0]
    for room in (name for name in ROOMS if "." not in name):
        folder = f"`{room}.py`" if (PROJECT / f"{room}.py").is_file() else f"`{room}/`"
        assert f"| {folder} |" in where, f"{room} is not in docs/developing/architecture.md's map"


# ---- the check, on trees made to break the rules -----------------------------------------------


@pytest.mark.parametrize(
    ("module", "text", "imported"),
    [
        ("releases/x.py", "import evals\n", "evals"),
        ("releases/x.py", "from evals.scenario import Scenario\n", "evals.scenario"),
        ("releases/x.py", "def late():\n    from evals import models\n", "evals.models"),
        ("releases/x.py", "from detective_site import urls\n", "detective_site.urls"),
        ("evals/x.py", "from detective_site import asgi\n", "detective_site.asgi"),
        ("evals/x.py", "import bench.suite\n", "bench.suite"),
        ("agent/x.py", "from releases.models import Release\n", "releases.models"),
        ("agent/x.py", "from django.db import models\n", "django.db"),
        ("agent/x.py", "import channels.layers\n", "channels.layers"),
        ("local_model/x.py", "from agent import loop\n", "agent.loop"),
        ("detective_client/x.py", "from agent import loop\n", "agent.loop"),
        ("detective_client/x.py", "from releases.models import Release\n", "releases.models"),
        ("detective_client/x.py", "from django.db import models\n", "django.db"),
        ("detective_site/x.py", "from bench import suite\n", "bench.suite"),
        # The layers of the Django apps, from the ground up: releases, sources, assessments,
        # evals, review (docs/developing/architecture.md).
        ("releases/x.py", "import agent.loop\n", "agent.loop"),
        ("releases/x.py", "from assessments import runner\n", "assessments.runner"),
        ("releases/x.py", "from sources.models import Commit\n", "sources.models"),
        ("releases/x.py", "from review import services\n", "review.services"),
        ("sources/x.py", "from assessments import runner\n", "assessments.runner"),
        ("sources/x.py", "import agent.loop\n", "agent.loop"),
        ("assessments/x.py", "from review import services\n", "review.services"),
        ("sources/x.py", "from review import services\n", "review.services"),
        ("evals/x.py", "from review import services\n", "review.services"),
        ("review/x.py", "from assessments import runner\n", "assessments.runner"),
    ],
)
def test_an_import_against_the_directions_is_found(
    tmp_path: Path, module: str, text: str, imported: str
) -> None:
    root = tree(
        tmp_path,
        {
            module: text,
            "evals/scenario.py": "",
            "evals/models.py": "",
            "detective_site/urls.py": "",
            "detective_site/asgi.py": "",
            "bench/suite.py": "",
            "releases/models.py": "",
            "agent/loop.py": "",
            "assessments/runner.py": "",
            "review/services.py": "",
            "sources/models.py": "",
        },
    )
    [problem] = violations(root)
    assert (problem.path, problem.imported) == (module, imported)
    assert str(problem).startswith(f"{module}:")


def test_what_the_directions_allow_is_not_reported(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "releases/x.py": "from detective_site.settings import DEBUG\nimport risk.policy\n",
            "releases/y.py": "from django.db import models\nfrom releases import x\n",
            "sources/x.py": "from releases import y\n",
            "assessments/x.py": "import agent.loop\nfrom sources import x\n",
            "review/x.py": "from evals import x\nfrom releases import y\n",
            "risk/policy.py": "",
            "evals/x.py": "from releases import y\nfrom local_model import serve\n",
            "detective_site/x.py": "from evals import x\nfrom review import x as r\n",
            "bench/x.py": "from detective_site import x\n",
            "agent/loop.py": "import httpx\n",
            "local_model/serve.py": "import subprocess\n",
            "detective_client/cli.py": "import httpx\nfrom detective_client import git\n",
            "detective_client/git.py": "import subprocess\n",
            "bench/y.py": "from detective_client import git\n",
            "detective_site/settings.py": "DEBUG = False\n",
            # Tests may reach into whatever they check.
            "releases/x_test.py": "import evals\nimport bench\n",
            "agent/conftest.py": "import django\n",
            "tests/whole_test.py": "from bench import x\n",
        },
    )
    assert violations(root) == []


def test_a_folder_the_map_does_not_know_is_reported(tmp_path: Path) -> None:
    root = tree(tmp_path, {"reports/x.py": "import agent\n"})
    [problem] = violations(root)
    assert "reports/ is not a room of the map" in str(problem)


@pytest.mark.parametrize(
    ("text", "imported"),
    [
        ("from sources import models\n", "sources.models"),
        ("from django.db import models\n", "django.db"),
        ("from releases.models import Release\n", "releases.models"),
    ],
)
def test_a_plain_room_inside_a_django_room_keeps_its_own_directions(
    tmp_path: Path, text: str, imported: str
) -> None:
    root = tree(
        tmp_path,
        {
            "sources/parsers/junit.py": text,
            "sources/models.py": "",
            "sources/services.py": "from sources.parsers import junit\n",
            "releases/models.py": "",
        },
    )
    [problem] = violations(root)
    assert (problem.path, problem.imported) == ("sources/parsers/junit.py", imported)


def test_the_outer_room_may_import_its_plain_room(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "sources/parsers/junit.py": "from xml.etree import ElementTree\n",
            "sources/parsers/openmetrics.py": "from sources.parsers import junit\n",
            "sources/services.py": "from sources.parsers.junit import parse\n",
        },
    )
    assert violations(root) == []


def test_relative_imports_are_resolved(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {"releases/sub/x.py": "from ...evals import scenario\n", "evals/scenario.py": ""},
    )
    [problem] = violations(root)
    assert problem.imported == "evals.scenario"


def test_a_circle_is_found_even_through_a_deferred_import(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "releases/services.py": "def enqueue():\n    from releases import tasks\n",
            "releases/tasks.py": "from releases import runner\n",
            "releases/runner.py": "from releases import services\n",
            "releases/views.py": "from releases import services, tasks\n",
        },
    )
    assert circles(graph(root)) == [["releases.runner", "releases.services", "releases.tasks"]]


def test_modules_are_named_as_python_imports_them(tmp_path: Path) -> None:
    root = tree(tmp_path, {"evals/evaluators/trial.py": "", "manage.py": ""})
    assert set(import_rules.modules(root)) == {
        "evals",
        "evals.evaluators",
        "evals.evaluators.trial",
        "manage",
    }
