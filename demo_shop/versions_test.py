"""The demo shop's versions as deployed: each release's files over those before it, and the
one behaviour the demo shows: 1.1.0's cart total fails on the carts with an emptied line
(one in six), 1.0.0's on none."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

import demo_shop


def test_each_version_lays_its_commit_over_the_ones_before() -> None:
    first, second = (demo_shop.tree_at(v) for v in demo_shop.VERSIONS)
    assert set(first) == set(second) >= {"shop/views.py", "shop/urls.py", "shop/pricing.py"}
    assert set(demo_shop.files_of("v1.1.0")) == {"shop/pricing.py"}
    assert first["shop/views.py"] == second["shop/views.py"]
    assert first["shop/pricing.py"] != second["shop/pricing.py"]
    with pytest.raises(KeyError):
        demo_shop.tree_at("v9.9.9")


def pricing_at(version: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    code = demo_shop.deploy(version, tmp_path / version)
    monkeypatch.syspath_prepend(str(code))
    for name in [n for n in sys.modules if n == "shop" or n.startswith("shop.")]:
        monkeypatch.delitem(sys.modules, name)
    return importlib.import_module("shop.pricing")


@pytest.mark.parametrize(("version", "failing"), [("v1.0.0", []), ("v1.1.0", [6, 12, 18])])
def test_only_the_new_version_divides_by_an_emptied_line(
    version: str, failing: list[int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pricing = pricing_at(version, tmp_path, monkeypatch)
    catalogue = importlib.import_module("shop.catalogue")
    failed = []
    for cart_id in range(1, 19):
        try:
            assert pricing.cart_total(catalogue.cart(cart_id)) > 0
        except ZeroDivisionError:
            failed.append(cart_id)
    assert failed == failing
