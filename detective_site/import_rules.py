"""The house's import directions: which top-level folder (room) may import which.

"Where things are" in docs/developing/architecture.md is the same map in prose.
`import_rules_test.py` checks the whole tree against it, so a module that imports across the
allowed directions, or a top-level folder the map does not know, fails the suite rather than
waiting for a reviewer.

Every import counts, also one inside a function: a deferred import is still a dependency, it
only hides the order the modules load in. Test modules (`*_test.py`, `conftest.py`, `tests/`)
are left out: a test may reach into whatever it checks.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

# The distributions that make a module a Django module.
DJANGO_MODULES = frozenset(
    {
        "channels",
        "channels_redis",
        "daphne",
        "dj_database_url",
        "django",
        "django_htmx",
        "django_tasks",
        "django_tasks_db",
        "template_partials",
        "whitenoise",
    }
)


@dataclass(frozen=True)
class Room:
    job: str
    # Modules of other rooms this one may import: a room's name, or one module of it.
    may_import: frozenset[str]
    django: bool = True


ROOMS: dict[str, Room] = {
    "agent": Room(
        "the agent: loop, providers, tools, context window, retry, telemetry",
        frozenset(),
        django=False,
    ),
    "local_model": Room(
        "the offline model: fetch and verify, build, serve, status of llama-server",
        frozenset(),
        django=False,
    ),
    "risk": Room(
        "the risk policy: signals, the metric judge, grounding, claims, filing (plain Python)",
        frozenset(),
        django=False,
    ),
    "detective_client": Room(
        "the CI client: git range reader, records, Conventional Commits, `python -m` commands",
        frozenset(),
        django=False,
    ),
    # A program of its own, not part of the site: the demo's small shop, run and traced by
    # `manage.py demo_traffic`. The seed writes its code into the demo's git repository.
    "demo_shop": Room(
        "the demo's instrumented service: a small Django shop, its versions' code, its runner",
        frozenset(),
    ),
    "releases": Room(
        "services, releases and their list, runs' and reports' tables, the verdict, the policy",
        # detective_client: `manage.py verdict --markdown` writes the CI client's summary.
        frozenset({"risk", "detective_client", "detective_site.settings"}),
    ),
    "sources": Room(
        "ingestion: a release's detail from git, JUnit XML and metrics, its history and the "
        "policy's verdict with it; tokens, the ingestion API, the release API's reads, the "
        "release page",
        frozenset(
            {
                "risk",
                "releases",
                "sources.parsers",
                "detective_client",
                "detective_site.settings",
                # The demo's seed writes the demo shop's code into its git repository.
                "demo_shop",
            }
        ),
    ),
    # A room inside a room: the parsers are plain Python (text in, records out), so that the
    # client and the tests use them without Django.
    "sources.parsers": Room(
        "the parsers of the sources' formats (JUnit XML, OpenMetrics, Prometheus' HTTP API)",
        frozenset({"detective_client"}),
        django=False,
    ),
    "traces": Room(
        "what the running version does: OTLP traces and logs in (`/otlp/v1/...`), per-route "
        "minutes and error groups, their signal's facts for the policy",
        frozenset(
            {
                "risk",
                "releases",
                "sources",
                "traces.otlp",
                "detective_client",
                "detective_site.settings",
                # `manage.py demo_traffic` deploys and runs the demo shop.
                "demo_shop",
            }
        ),
    ),
    # Plain Python inside the traces app: the OTLP body read, checked, grouped and folded.
    "traces.otlp": Room(
        "OTLP traces decoded, each span checked, exceptions grouped, figures folded",
        frozenset({"sources.parsers"}),
        django=False,
    ),
    "assessments": Room(
        "a run: its task, the seam that runs the agent (runner/), its live stream and pages, "
        "filing its report, the assess endpoint, the demo (`seed_demo`)",
        frozenset(
            {
                "agent",
                "local_model",
                "risk",
                "releases",
                "sources",
                "detective_client",
                "detective_site.settings",
            }
        ),
    ),
    "evals": Room(
        "scenarios, trials, evaluators and eval runs; builds on releases, sources and traces "
        "(a scenario's files are ingested as a release's are)",
        frozenset(
            {
                "agent",
                "local_model",
                "risk",
                "releases",
                "assessments",
                "sources",
                "traces",
                "detective_client",
                "detective_site.settings",
            }
        ),
    ),
    "review": Room(
        "the review desk: decisions on filed reports, their export as eval scenarios",
        frozenset({"risk", "releases", "evals", "detective_site.settings"}),
    ),
    "webhooks": Room(
        "webhook endpoints and deliveries: signed POSTs of a verdict, retried by a task",
        frozenset({"releases", "detective_site.settings"}),
    ),
    "detective_site": Room(
        "the wiring: settings, URLs, ASGI and websocket routes, `up` and its supervisor",
        frozenset(
            {
                "agent",
                "local_model",
                "risk",
                "releases",
                "assessments",
                "review",
                "evals",
                "sources",
                "traces",
            }
        ),
    ),
    "bench": Room(
        "the benchmarks (`manage.py bench`): they measure everything, so they see everything",
        frozenset(
            {
                "agent",
                "local_model",
                "risk",
                "releases",
                "assessments",
                "review",
                "evals",
                "sources",
                "traces",
                "detective_site",
                "detective_client",
            }
        ),
    ),
    "manage": Room("Django's command line", frozenset({"detective_site"})),
}


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    imported: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: imports {self.imported}: {self.why}"


def is_test(relative: Path) -> bool:
    return (
        relative.parts[0] == "tests"
        or relative.name.endswith("_test.py")
        or relative.name == "conftest.py"
    )


def modules(root: Path) -> dict[str, Path]:
    """The non-test modules under `root` by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    # Hidden folders (.venv, .git) hold no module of the project, and the environment is big.
    tops = [entry for entry in root.iterdir() if not entry.name.startswith(".")]
    files = [top for top in tops if top.suffix == ".py"]
    files += [path for top in tops if top.is_dir() for path in top.rglob("*.py")]
    for path in sorted(files):
        relative = path.relative_to(root)
        if any(part.startswith(".") for part in relative.parts) or is_test(relative):
            continue
        parts = list(relative.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if parts:
            found[".".join(parts)] = path
    return found


def imports(path: Path, name: str, known: Iterable[str]) -> Iterator[tuple[int, str]]:
    """(line, module) for every import in the file, relative ones resolved; `from a import b`
    names a.b when that is a module, else a."""
    known = set(known)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                dotted = f"{base}.{alias.name}"
                yield node.lineno, dotted if dotted in known else base


def room_of(module: str) -> str | None:
    """The room a module belongs to: the longest room name it is, or lies under (a room may be
    a package inside another room, e.g. plain-Python parsers inside a Django app)."""
    candidates = [name for name in ROOMS if module == name or module.startswith(f"{name}.")]
    return max(candidates, key=len) if candidates else None


def _allowed(imported: str, rule: Iterable[str]) -> bool:
    return any(imported == allowed or imported.startswith(f"{allowed}.") for allowed in rule)


def violations(root: Path) -> list[Violation]:
    """Every import in `root`'s non-test modules that goes against ROOMS."""
    found = modules(root)
    problems: list[Violation] = []
    unknown: set[str] = set()
    for name, path in found.items():
        where = path.relative_to(root).as_posix()
        room_name = room_of(name)
        if room_name is None:
            top = name.split(".")[0]
            if top not in unknown:
                unknown.add(top)
                problems.append(Violation(where, 1, "-", f"{top}/ is not a room of the map"))
            continue
        room = ROOMS[room_name]
        for line, imported in sorted(set(imports(path, name, found))):
            top = imported.split(".")[0]
            target = room_of(imported)
            if target == room_name:
                continue
            if target is not None and not _allowed(imported, room.may_import):
                allowed = ", ".join(sorted(room.may_import)) or "no other room"
                why = f"{room_name} may import {allowed} only"
                problems.append(Violation(where, line, imported, why))
            elif top in DJANGO_MODULES and not room.django:
                problems.append(Violation(where, line, imported, f"{room_name} is plain Python"))
    return problems


def graph(root: Path) -> dict[str, set[str]]:
    """Which module of the project imports which (any import, at any depth)."""
    found = modules(root)
    edges: dict[str, set[str]] = {name: set() for name in found}
    for name, path in found.items():
        for _, imported in imports(path, name, found):
            target = imported
            while target and target not in found:
                target = target.rpartition(".")[0]
            if target and target != name:
                edges[name].add(target)
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: groups of modules that each reach all the others (Tarjan's
    strongly connected components of more than one module), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:
        # Iterative: a deep chain of imports must not hit the recursion limit.
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(edges[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found)
