"""More shapes of real bugs for the suspects (`bench/suspect_shapes.py`), those the call evidence
missed on the real-bug measurement of 2026-11-29 (docs/decisions/2026-11-29-suspects-calls.md):
a test whose call crosses modules (python-semver's CLI test calls `cmd_bump` in cli.py, whose
table names `bump_minor` in version.py, where the bug is), and a doctest page (`.rst`) whose
examples run in a namespace a conftest fills, with no test file to read imports from.

Each is a small project made with real git and run by real pytest, as the first shapes are.
"""

from __future__ import annotations

import subprocess
import sys

from bench.suspect_shapes import Shape, _clean_env, _pytest_report, _Repo

__all__ = ["CALL_SHAPES"]

_VERSION = """class Version:
    def __init__(self, major, minor=0, patch=0):
        self.major, self.minor, self.patch = major, minor, patch

    @classmethod
    def parse(cls, text):
        major, minor, patch = (int(part) for part in text.split("."))
        return cls(major, minor, patch)

    def bump_major(self):
        return type(self)(self.major + 1)

    def bump_minor(self):
        return type(self)(self.major, self.minor + 1)

    def bump_patch(self):
        return type(self)(self.major, self.minor, self.patch + 1)

    def __str__(self):
        return '%d.%d.%d' % (self.major, self.minor, self.patch)
"""

_CLI = """from .version import Version


def cmd_bump(args):
    maptable = {"major": "bump_major", "minor": "bump_minor", "patch": "bump_patch"}
    ver = Version.parse(args.version)
    # The method is looked up by its name: no call of bump_minor in the text.
    func = getattr(ver, maptable[args.bump])
    return str(func())


def cmd_check(args):
    Version.parse(args.version)
    return None
"""


def _call_across_modules(repo: _Repo) -> str:
    """python-semver: the CLI test calls `cmd_bump` (named only in its parametrized id) in
    cli.py, unchanged in the range, which calls `bump_minor` in version.py by `getattr`; a
    newer "Format with black" sweep changed `__main__.py`, which the test imports directly."""
    repo.write({
        "src/semverish/__init__.py": "from .version import Version\n\n__all__ = ['Version']\n",
        "src/semverish/version.py": _VERSION,
        "src/semverish/cli.py": _CLI,
        "src/semverish/__main__.py": (
            "import sys\n\nfrom semverish import cli\n\n\n"
            "def main(argv=None):\n    return cli.cmd_check(argv)\n\n\n"
            "if __name__ == '__main__':\n    sys.exit(main(sys.argv[1:]))\n"
        ),
        "tests/conftest.py": "import sys\n\nsys.path.insert(0, 'src')\n",
        "tests/test_cli.py": (
            "from argparse import Namespace\n\nimport pytest\n\n"
            "from semverish.__main__ import main\nfrom semverish.cli import cmd_bump, cmd_check\n"
            "\n\n@pytest.mark.parametrize(\n    'func,args,expected',\n    [\n"
            "        (cmd_bump, Namespace(bump='minor', version='1.2.3'), '1.3.0'),\n"
            "        (cmd_check, Namespace(version='1.2.3'), None),\n    ],\n)\n"
            "def test_cli(func, args, expected):\n    result = func(args)\n"
            "    assert result == expected\n\n\n"
            "def test_main():\n    assert main(Namespace(version='1.0.0')) is None\n"
        ),
    })  # fmt: skip
    repo.commit("start")
    repo.git("tag", "v1")
    repo.edit("src/semverish/version.py", "self.minor + 1)", "self.minor + 2)")
    culprit = repo.commit("bump_minor: keep the class")
    repo.edit(
        "src/semverish/__main__.py", "if __name__ == '__main__':", 'if __name__ == "__main__":'
    )
    repo.edit("src/semverish/version.py", "'%d.%d.%d'", '"%d.%d.%d"')
    repo.edit(
        "src/semverish/version.py",
        "self.major, self.minor, self.patch = major, minor, patch",
        "self.major = major\n        self.minor = minor\n        self.patch = patch",
    )
    repo.commit("Format with black")
    return culprit


_LENGTH = """class Length:
    def __init__(self, metres):
        self.metres = metres

    @classmethod
    def parse(cls, text):
        if text.endswith("km"):
            return cls(float(text[:-2]) * 1000)
        return cls(float(text[:-1]))

    def to_metres(self):
        return round(self.metres)

    def to_feet(self):
        return round(self.metres * 3.28084)
"""


def _doctest_page(repo: _Repo) -> str:
    """python-semver's docs: a `.rst` page of doctests run by pytest (`--doctest-glob`), its
    names given by a conftest's `doctest_namespace`; the report names the page, no test file."""
    repo.write({
        "pytest.ini": "[pytest]\naddopts = --doctest-glob='*.rst'\n",
        "units/__init__.py": "",
        "units/length.py": _LENGTH,
        "units/area.py": "def square_metres(a, b):\n    return a * b\n",
        "docs/conftest.py": (
            "import pytest\n\nfrom units.length import Length\n\n\n"
            "@pytest.fixture(autouse=True)\ndef names(doctest_namespace):\n"
            "    doctest_namespace['Length'] = Length\n"
        ),
        "docs/usage.rst": (
            "Usage\n=====\n\n.. code-block:: python\n\n"
            "    >>> Length.parse('2km').to_metres()\n    2000\n"
            "    >>> Length.parse('3m').to_metres()\n    3\n"
        ),
    })  # fmt: skip
    repo.commit("start")
    repo.git("tag", "v1")
    repo.edit("units/length.py", "return round(self.metres)", "return int(self.metres) // 10")
    culprit = repo.commit("to_metres: whole metres")
    repo.edit("units/length.py", "self.metres * 3.28084", "self.metres * 3.2808399")
    repo.commit("to_feet: the exact factor")
    repo.edit("units/area.py", "return a * b", "return float(a) * float(b)")
    repo.commit("area: floats")
    return culprit


def _doctest_report(repo: _Repo) -> bytes:
    """pytest's report of the doctest page (and any tests), run from the root."""
    out = repo.root / "report.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         "-p", "no:django", f"--junitxml={out}", "docs"],
        cwd=repo.root, capture_output=True, check=False,
        env={**_clean_env(), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(repo.root)},
    )  # fmt: skip
    data = out.read_bytes()
    out.unlink()
    return data


CALL_SHAPES = (
    Shape("call across modules (python-semver CLI)", "python", _call_across_modules,
          _pytest_report),
    Shape("doctest page (python-semver docs)", "python", _doctest_page, _doctest_report),
)  # fmt: skip
