"""The demo's own running service: a small shop (Django, three routes) that the demo deploys
at two versions and sends requests to, instrumented with OpenTelemetry's Django
instrumentation and exporting through the SDK's OTLP/HTTP exporter to Detective, as a user's
service does (docs/using/errors-and-traces.md, "The demo's shop").

Its code is kept here as each release's commit writes it (`versions/<overlay>/`): the seed
builds the shop's git repository from these same files (`sources.demo_files`), so the line an
exception's stack trace runs through is the line the release's commit changed, and
`manage.py demo_traffic` (`traces.demo_traffic`) deploys each version from them and drives it
with `demo_shop.serve`. Plain files and paths here: nothing of Detective is imported.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["SERVICE", "VERSIONS", "deploy", "files_of", "tree_at"]

SERVICE = "Shop"
VERSIONS_DIR = Path(__file__).resolve().parent / "versions"
# Each demo release of the shop, oldest first, and the overlays its commit writes (a folder of
# `versions/`, laid over the files of the releases before it).
VERSIONS: dict[str, tuple[str, ...]] = {
    "v1.0.0": ("base", "v1_0_0"),
    "v1.1.0": ("v1_1_0",),
}


def files_of(version: str) -> dict[str, str]:
    """The files the release's commit writes: repository path -> text."""
    files: dict[str, str] = {}
    for overlay in VERSIONS[version]:
        root = VERSIONS_DIR / overlay
        for path in sorted(root.rglob("*.py")):
            files[path.relative_to(root).as_posix()] = path.read_text(encoding="utf-8")
    return files


def tree_at(version: str) -> dict[str, str]:
    """The shop's files as released at `version`: its commit's over those before it."""
    tree: dict[str, str] = {}
    for name in VERSIONS:
        tree.update(files_of(name))
        if name == version:
            return tree
    raise KeyError(version)


def deploy(version: str, into: Path) -> Path:
    """The shop at `version` written under `into` (a deploy directory, as a host has it)."""
    for relative, text in tree_at(version).items():
        target = into / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return into
