"""The parsers are plain Python: text or bytes in, records out, no Django (the architecture's
rule; import_rules.py maps whole rooms, and `sources` as a whole is a Django app). Checked with
the import map's own reader, so a deferred import inside a function counts too."""

from __future__ import annotations

from pathlib import Path

from detective_site.import_rules import DJANGO_MODULES, imports, modules

PROJECT = Path(__file__).resolve().parents[2]


def test_no_module_of_sources_parsers_imports_django() -> None:
    found = modules(PROJECT)
    parsers = {
        name: path
        for name, path in found.items()
        if name == "sources.parsers" or name.startswith("sources.parsers.")
    }
    assert "sources.parsers.openmetrics" in parsers
    offending = [
        f"{path.relative_to(PROJECT)}:{line}: imports {imported}"
        for name, path in parsers.items()
        for line, imported in imports(path, name, found)
        if imported.split(".")[0] in DJANGO_MODULES
        or imported.split(".")[0] in {"releases", "evals", "detective_site"}
        or (imported.startswith("sources.") and not imported.startswith("sources.parsers"))
    ]
    assert offending == []


def test_the_check_sees_a_deferred_django_import(tmp_path: Path) -> None:
    package = tmp_path / "sources" / "parsers"
    package.mkdir(parents=True)
    for folder in (tmp_path / "sources", package):
        (folder / "__init__.py").touch()
    (package / "sneaky.py").write_text("def f():\n    from django.db import models\n")
    found = modules(tmp_path)
    seen = list(imports(package / "sneaky.py", "sources.parsers.sneaky", found))
    assert seen == [(2, "django.db")]
