"""Synthetic histories, made with real `git`, that reproduce the shapes of real bugs where the
suspects went wrong (issue 38), and the rank of each one's culprit as the CI client's records
rank it (`detective_client.head.read_head`, `sources.services.suspects.rank_from_head`).

Each shape is a small project: a release tagged v1, then the culprit (a one-line bug) among
commits that mislead: a newer sweep over every function ("improve typing"), a docs change, a
dependency bump, a newer change to a module the test imports directly. The failing test's
JUnit report is written by the real runner where it runs here (pytest, for the Python shapes)
or, for jest, by hand in jest-junit's default format (no `file` attribute, a describe block's
title for a classname) around the stack node itself printed for the failing assertion.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from detective_client.git import read_range
from detective_client.head import read_head, with_hunks
from detective_client.hunks import read_hunks
from risk.suspects import RangeCommit
from sources.parsers import junit
from sources.services.suspects import rank_from_head

__all__ = ["SHAPES", "Outcome", "Shape", "run_shape"]


@dataclass(frozen=True)
class Outcome:
    shape: str
    language: str
    culprit: str
    rank: int | None  # 1 = first suspect; None = not among the suspects
    first_reason: str
    failures: int


class _Repo:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.clock = 1_750_000_000
        root.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")
        self.git("config", "user.name", "Mira Holt")
        self.git("config", "user.email", "mira@example.org")

    def git(self, *args: str) -> str:
        env = {**os.environ, "GIT_AUTHOR_DATE": f"@{self.clock} +0000"}
        env["GIT_COMMITTER_DATE"] = env["GIT_AUTHOR_DATE"]
        return subprocess.run(
            ["git", "-C", str(self.root), *args], check=True, capture_output=True, text=True,
            env=env,
        ).stdout.strip()  # fmt: skip

    def write(self, files: dict[str, str]) -> None:
        for path, text in files.items():
            target = self.root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)

    def edit(self, path: str, old: str, new: str) -> None:
        target = self.root / path
        text = target.read_text()
        assert old in text, (path, old)
        target.write_text(text.replace(old, new, 1))

    def commit(self, message: str) -> str:
        self.clock += 3_600
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")


# ---- Python shapes, run by pytest ----------------------------------------------------------

_PARSER = """def loads(s):
    src = s.replace("\\r\\n", "\\n")
    return dict(parse_pair(line) for line in src.splitlines() if line)


def parse_pair(line):
    key, value = line.split("=", 1)
    return key.strip(), parse_value(value.strip())


def parse_value(text):
    if text.startswith('"'):
        return unescape(text[1:-1])
    return int(text)


def unescape(text):
    return text.replace("\\\\n", "\\n").replace("\\\\t", "\\t")
"""


def _tests_package(repo: _Repo) -> str:
    """tomli: the tests reach the library through their own package (`from . import tomllib`,
    the tests' `__init__` importing it, its `__init__` re-exporting the parser)."""
    repo.write({
        "src/tomlish/__init__.py": "from ._parser import loads\n\n__all__ = ['loads']\n",
        "src/tomlish/_parser.py": _PARSER,
        "tests/__init__.py": "import sys\nsys.path.insert(0, 'src')\nimport tomlish as tomllib\n",
        "tests/test_misc.py": (
            "from . import tomllib\n\n\ndef test_newline_escape():\n"
            "    assert tomllib.loads('a = \"x\\\\ny\"') == {'a': 'x\\ny'}\n\n\n"
            "def test_int():\n    assert tomllib.loads('a = 1') == {'a': 1}\n"
        ),
        "README.md": "# tomlish\n",
        "pyproject.toml": "[project]\nname = 'tomlish'\ndependencies = ['attrs==23.1']\n",
    })  # fmt: skip
    repo.commit("start")
    repo.git("tag", "v1")
    repo.edit("src/tomlish/_parser.py", r'.replace("\\n", "\n")', r'.replace("\\n", "n")')
    culprit = repo.commit("unescape: share the table")
    repo.edit("pyproject.toml", "attrs==23.1", "attrs==24.2")
    repo.commit("build(deps): bump attrs from 23.1 to 24.2")
    for name in (
        "def loads(s)",
        "def parse_pair(line)",
        "def parse_value(text)",
        "def unescape(text)",
    ):
        repo.edit("src/tomlish/_parser.py", name, name.replace(")", ": str)"))
    repo.edit("src/tomlish/__init__.py", "__all__ = ['loads']", "__all__: list[str] = ['loads']")
    repo.commit("improve typing")
    repo.edit("README.md", "# tomlish\n", "# tomlish\n\nA small TOML reader.\n")
    repo.commit("docs: say what it is")
    return culprit


def _conftest_fixture(repo: _Repo) -> str:
    """markupsafe: an autouse fixture runs each test against each implementation, which only
    the conftest imports."""
    repo.write({
        "escaper/__init__.py": (
            "from ._native import escape\n\n\nclass Markup(str):\n"
            "    def join(self, seq):\n        return Markup(super().join(map(escape, seq)))\n\n"
            "    def format(self, *args):\n        return Markup(super().format(*args))\n"
        ),
        "escaper/_native.py": "def escape(s):\n    return str(s).replace('&', '&amp;')"
                              ".replace('<', '&lt;')\n",
        "escaper/_fast.py": "def escape(s):\n    text = str(s)\n"
                            "    return text.replace('&', '&amp;').replace('<', '&lt;')\n",
        "tests/conftest.py": (
            "from importlib import import_module\n\nimport pytest\n\n\n"
            "@pytest.fixture(params=('_native', '_fast'))\ndef escape(request):\n"
            "    return import_module(f'escaper.{request.param}').escape\n"
        ),
        "tests/test_escape.py": (
            "def test_escape(escape):\n    assert escape('<a&b>') == '&lt;a&amp;b>'\n"
        ),
    })  # fmt: skip
    repo.commit("start")
    repo.git("tag", "v1")
    repo.edit("escaper/_fast.py", "replace('&', '&amp;')", "replace('&', '&')")
    culprit = repo.commit("fast escape: one pass fewer")
    repo.edit(
        "escaper/__init__.py",
        "super().join(map(escape, seq))",
        "super().join(escape(s) for s in seq)",
    )
    repo.commit("Markup.join takes any iterable")
    return culprit


def _deleted_line(repo: _Repo) -> str:
    """A bug that only removed a line: at the head no line of the culprit's is left."""
    repo.write({
        "units/__init__.py": "",
        "units/convert.py": (
            "def to_metres(value, unit):\n"
            "    if unit == 'km':\n"
            "        value = value * 1000\n"
            "    return value\n\n\n"
            "def to_seconds(value, unit):\n"
            "    if unit == 'min':\n"
            "        value = value * 60\n"
            "    return value\n"
        ),
        "tests/test_convert.py": (
            "from units.convert import to_metres, to_seconds\n\n\n"
            "def test_km():\n    assert to_metres(2, 'km') == 2000\n\n\n"
            "def test_min():\n    assert to_seconds(2, 'min') == 120\n"
        ),
    })  # fmt: skip
    repo.commit("start")
    repo.git("tag", "v1")
    repo.edit("units/convert.py", "    if unit == 'km':\n        value = value * 1000\n", "")
    culprit = repo.commit("metres: kilometres are converted upstream")
    repo.edit("units/convert.py", "    if unit == 'min':", "    if unit in ('min', 'minutes'):")
    repo.commit("seconds: accept 'minutes'")
    return culprit


def _schema_change(repo: _Repo) -> str:
    """A migration that makes a column NOT NULL without a default: the tests error in their
    fixture's setup (sqlite3's IntegrityError), through no line of the migration, while a
    newer change to the module the test imports looks like the cause."""
    repo.write({
        "shop/__init__.py": "",
        "shop/orders.py": (
            "def create_order(db, total, currency='EUR'):\n"
            "    db.execute('INSERT INTO orders (total, currency) VALUES (?, ?)', "
            "(total, currency))\n"
            "    return db.execute('SELECT max(id) FROM orders').fetchone()[0]\n\n\n"
            "def order_total(db, order_id):\n"
            "    row = db.execute('SELECT total FROM orders WHERE id = ?', (order_id,))\n"
            "    return row.fetchone()[0]\n"
        ),
        "migrations/0001_orders.sql": (
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER NOT NULL, "
            "currency TEXT);\n"
        ),
        "tests/conftest.py": (
            "import sqlite3\nfrom pathlib import Path\n\nimport pytest\n\n\n"
            "@pytest.fixture\ndef db():\n"
            "    conn = sqlite3.connect(':memory:')\n"
            "    for step in sorted(Path(__file__).parents[1].glob('migrations/*.sql')):\n"
            "        conn.executescript(step.read_text())\n"
            "    conn.execute('INSERT INTO orders (total) VALUES (10)')  # the seed order\n"
            "    return conn\n"
        ),
        "tests/test_orders.py": (
            "from shop.orders import create_order, order_total\n\n\n"
            "def test_total(db):\n    assert order_total(db, create_order(db, 25)) == 25\n\n\n"
            "def test_seed(db):\n    assert order_total(db, 1) == 10\n"
        ),
    })  # fmt: skip
    repo.commit("start")
    repo.git("tag", "v1")
    repo.write(
        {
            "migrations/0002_order_currency.sql": (
                "CREATE TABLE orders_new (id INTEGER PRIMARY KEY, total INTEGER NOT NULL, "
                "currency TEXT NOT NULL);\n"
                "INSERT INTO orders_new SELECT id, total, coalesce(currency, 'EUR') FROM orders;\n"
                "DROP TABLE orders;\nALTER TABLE orders_new RENAME TO orders;\n"
            ),
        }
    )
    culprit = repo.commit("orders: currency is required")
    repo.edit("shop/orders.py", "    return row.fetchone()[0]", "    return int(row.fetchone()[0])")
    repo.commit("orders: totals are whole cents")
    repo.write({"README.md": "# shop\n"})
    repo.commit("docs: a readme")
    return culprit


# ---- JavaScript shapes, node's stack in jest-junit's default report ------------------------

_SHIM = (
    "const assert = require('node:assert');\n"
    "const expect = (got) => ({ toBe: (want) => assert.strictEqual(got, want) });\n"
)


def _require_the_package(repo: _Repo) -> str:
    """commander.js: the tests `require('../')`; package.json's main names index.js, which
    requires lib/."""
    repo.write({
        "package.json": json.dumps({"name": "cmdr", "main": "./index.js",
                                    "devDependencies": {"jest": "29.6.0"}}, indent=2) + "\n",
        "index.js": "const { Command } = require('./lib/command.js');\n"
                    "exports.Command = Command;\nexports.program = new Command();\n",
        "lib/command.js": (
            "const { camelcase } = require('./util');\n\n"
            "class Command {\n"
            "  constructor() {\n    this._opts = {};\n  }\n\n"
            "  option(flags, value) {\n"
            "    const name = camelcase(flags.replace(/^--/, ''));\n"
            "    this._opts[name] = value;\n"
            "    return this;\n"
            "  }\n\n"
            "  opts() {\n    return this._opts;\n  }\n"
            "}\n\nexports.Command = Command;\n"
        ),
        "lib/util.js": (
            "exports.camelcase = (s) => s.replace(/-(\\w)/g, (_, c) => c.toUpperCase());\n"
        ),
        "tests/options.test.js": _SHIM + (
            "const { Command } = require('../');\n\n"
            "const cmd = new Command().option('--dry-run', true);\n"
            "expect(cmd.opts().dryRun).toBe(true);\n"
        ),
        "README.md": "# cmdr\n",
    })  # fmt: skip
    repo.commit("start")
    repo.git("tag", "v1")
    repo.edit("lib/command.js", "flags.replace(/^--/, '')", "flags.replace(/^-/, '')")
    culprit = repo.commit("option: accept short flags")
    repo.edit("package.json", '"jest": "29.6.0"', '"jest": "29.7.0"')
    repo.commit("chore(deps-dev): bump jest from 29.6.0 to 29.7.0")
    repo.edit(
        "index.js",
        "exports.program = new Command();",
        "exports.program = new Command();\nexports.createCommand = () => new Command();",
    )
    repo.commit("feat: createCommand")
    repo.edit("README.md", "# cmdr\n", "# cmdr\n\nCommand lines for node.\n")
    repo.commit("docs: a line more")
    return culprit


def _root_test_js(repo: _Repo) -> str:
    """debug: a root-level test.js requiring the package by `./`; main in src/."""
    repo.write({
        "package.json": json.dumps({"name": "dbg", "main": "./src/index.js"}, indent=2) + "\n",
        "src/index.js": "module.exports = require('./node.js');\n",
        "src/node.js": "const common = require('./common');\nmodule.exports = common;\n",
        "src/browser.js": "const common = require('./common');\nmodule.exports = common;\n",
        "src/common.js": (
            "function humanize(ms) {\n"
            "  if (ms >= 1000) {\n"
            "    return `${Math.round(ms / 1000)}s`;\n"
            "  }\n"
            "  return `${ms}ms`;\n"
            "}\n\n"
            "function enable(names) {\n  return names.split(',');\n}\n\n"
            "module.exports = { humanize, enable };\n"
        ),
        "test.js": _SHIM + (
            "const debug = require('./');\n\nexpect(debug.humanize(1500)).toBe('2s');\n"
        ),
    })  # fmt: skip
    repo.commit("start")
    repo.git("tag", "v1")
    repo.edit("src/common.js", "if (ms >= 1000)", "if (ms > 1000 * 1000)")
    culprit = repo.commit("humanize: seconds from a thousand")
    repo.edit("src/common.js", "return names.split(',');", "return names.split(/[\\s,]+/);")
    repo.commit("enable: split on spaces too")
    repo.edit("src/browser.js", "module.exports = common;", "module.exports = { ...common };")
    repo.commit("browser: a copy")
    return culprit


_DEDUPE = (
    "export default function classNames(...args) {\n"
    "  const set = Object.create(null);\n"
    "  for (const arg of args) appendValue(set, arg);\n"
    "  return Object.keys(set).filter((key) => set[key]).join(' ');\n"
    "}\n\n"
    "function appendValue(set, arg) {\n"
    "  if (typeof arg === 'string') appendString(set, arg);\n"
    "  else if (arg && typeof arg === 'object') appendObject(set, arg);\n"
    "}\n\n"
    "function appendString(set, text) {\n"
    "  const names = text.split(/\\s+/);\n"
    "  for (let i = 0; i < names.length; i++) {\n"
    "    set[names[i]] = true;\n"
    "  }\n"
    "}\n\n"
    "function appendObject(set, object) {\n"
    "  for (const key in object) set[key] = Boolean(object[key]);\n"
    "}\n"
)


def _es_module(repo: _Repo) -> str:
    """classnames: an ES module package ("type": "module"), node:test's own junit reporter (no
    file attribute, every frame a file:// URL), two modules of the same shape at the root and
    tests of the same names (index.js and tests/index.js, dedupe.js and tests/dedupe.js)."""
    test = (
        "import {{ describe, it }} from 'node:test';\n"
        "import assert from 'node:assert/strict';\n"
        "import classNames from '../{module}.js';\n\n"
        "describe('{module}', () => {{\n"
        "  it('joins strings', () => {{\n"
        "    assert.equal(classNames('a b', 'c'), 'a b c');\n"
        "  }});\n\n"
        "  it('keeps truthy keys', () => {{\n"
        "    assert.equal(classNames({{ a: true, b: false }}), 'a');\n"
        "  }});\n"
        "}});\n"
    )
    repo.write({
        "package.json": json.dumps({"name": "cn", "type": "module", "main": "./index.js"}) + "\n",
        "index.js": _DEDUPE.replace("Object.create(null)", "{}"),
        "dedupe.js": _DEDUPE,
        "tests/index.js": test.format(module="index"),
        "tests/dedupe.js": test.format(module="dedupe"),
    })  # fmt: skip
    repo.commit("start")
    repo.git("tag", "v1")
    repo.edit("dedupe.js", "    set[names[i]] = true;", "    set[names[i]] = i > 0;")
    culprit = repo.commit("dedupe: tidy appendString")
    loop = "  for (const key in object) set[key] = Boolean(object[key]);"
    for path in ("index.js", "dedupe.js"):
        repo.edit(path, loop, loop.replace("key in object", "key of Object.keys(object)"))
    repo.commit("Use Object.keys in both entry points")
    split = "const names = text.split("
    repo.edit("index.js", split, split.replace("text.split", "text.trim().split"))
    repo.commit("index: trim first")
    return culprit


def _node_test_report(repo: _Repo) -> bytes:
    """node:test's own junit reporter, as `node --test --test-reporter=junit` writes it."""
    out = repo.root / "report.xml"
    subprocess.run(
        ["node", "--test", "--test-reporter=junit", f"--test-reporter-destination={out}",
         "tests/index.js", "tests/dedupe.js"],
        cwd=repo.root, capture_output=True, check=False,
    )  # fmt: skip
    data = out.read_bytes()
    out.unlink()
    return data


def _clean_env() -> dict[str, str]:
    """The environment without this project's (its settings, its import path)."""
    return {
        k: v for k, v in os.environ.items()
        if k not in ("DJANGO_SETTINGS_MODULE", "PYTHONPATH") and not k.startswith("PYTEST")
    }  # fmt: skip


def _pytest_report(repo: _Repo) -> bytes:
    out = repo.root / "report.xml"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         "-p", "no:django",
         f"--junitxml={out}", "tests"],
        cwd=repo.root, capture_output=True, check=False,
        env={**_clean_env(), "PYTHONDONTWRITEBYTECODE": "1"},
    )  # fmt: skip
    if not out.exists():
        raise RuntimeError(
            f"pytest wrote no report: {done.stdout[-2000:]!r} {done.stderr[-2000:]!r}"
        )
    data = out.read_bytes()
    out.unlink()
    return data


def _jest_report(repo: _Repo, test: str, describe: str, title: str) -> bytes:
    """jest-junit's default: testsuite named after the describe block, classname and name
    "{describe} {title}", no file attribute; the failure's text the stack node printed."""
    done = subprocess.run(
        ["node", test], cwd=repo.root, capture_output=True, text=True, check=False
    )
    stack = done.stderr[done.stderr.find("AssertionError") :].strip() or done.stderr
    full = f"{describe} {title}"
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<testsuites name="jest tests" tests="1" failures="1" errors="0" time="0.5">\n'
        f'  <testsuite name={quoteattr(describe)} errors="0" failures="1" skipped="0" '
        'timestamp="2026-11-29T03:00:00" time="0.4" tests="1">\n'
        f'    <testcase classname={quoteattr(full)} name={quoteattr(full)} time="0.01">\n'
        f"      <failure>{escape(stack)}</failure>\n"
        "    </testcase>\n  </testsuite>\n</testsuites>\n"
    ).encode()


@dataclass(frozen=True)
class Shape:
    name: str
    language: str
    build: Callable[[_Repo], str]
    report: Callable[[_Repo], bytes]


SHAPES = (
    Shape("tests package (tomli)", "python", _tests_package, _pytest_report),
    Shape("conftest fixture (markupsafe)", "python", _conftest_fixture, _pytest_report),
    Shape("deleted line", "python", _deleted_line, _pytest_report),
    Shape("schema change, setup errors", "python", _schema_change, _pytest_report),
    Shape(
        "require('../') (commander.js)", "javascript", _require_the_package,
        lambda r: _jest_report(r, "tests/options.test.js", "options", "dry run"),
    ),
    Shape("ES module, node:test (classnames)", "javascript", _es_module, _node_test_report),
    Shape(
        "root test.js (debug)", "javascript", _root_test_js,
        lambda r: _jest_report(r, "test.js", "humanize", "seconds"),
    ),
)  # fmt: skip


def run_shape(shape: Shape, root: Path) -> Outcome:
    """Builds the shape's history in `root`, runs its tests, and ranks the failures' suspects
    from what the CI client would send."""
    repo = _Repo(root)
    culprit = shape.build(repo)
    repo.git("tag", "v2")
    report = shape.report(repo)
    ranks, reason, failures = rank_range(repo.root, "v1..v2", report, culprit)
    worst = None if not ranks or None in ranks else max(r for r in ranks if r is not None)
    return Outcome(shape.name, shape.language, culprit, worst, reason, failures)


def rank_range(
    root: Path,
    rev_range: str,
    report: bytes,
    culprit: str,
    skip: frozenset[tuple[str, str]] = frozenset(),
) -> tuple[list[int | None], str, int]:
    """The culprit's rank for each failing test of `report` (None: not a suspect), the first
    failure's first suspect's evidence, and how many tests failed; ranked from what the CI
    client reads of `rev_range` in the checkout at `root`. `skip`: (classname, name) of tests
    that fail without the culprit too (a real project's environment), left out."""
    cases = [
        c for c in junit.parse(report, "report.xml")
        if c.status in ("failed", "error") and (c.classname, c.name) not in skip
    ]  # fmt: skip
    hunks = read_hunks(root, rev_range)
    records = with_hunks(read_range(root, rev_range), hunks)
    head = read_head(root, rev_range, hunks)
    by_sha = {r.sha: r for r in records}
    commits = [  # newest first, as the hunks are read
        RangeCommit(
            h.sha, by_sha[h.sha].message.split("\n", 1)[0], by_sha[h.sha].author_name, h.files
        )
        for h in hunks.commits
    ]
    changed = {f.path for c in hunks.commits for f in c.files}
    kept = rank_from_head(cases, commits, head.tests, head.blame, head.scopes, changed)
    ranks: list[int | None] = []
    reason = ""
    for stored in kept:
        shas = [s["sha"] for s in stored["ranked"]]
        ranks.append(shas.index(culprit) + 1 if culprit in shas else None)
        if stored["ranked"] and not reason:
            reason = stored["ranked"][0]["reason"]
    return ranks, reason, len(cases)
