"""The CI client reads a test file's imports and a module's functions with its own copy of
`risk.suspects`' rules (the client is a distribution of its own and cannot import `risk`): both
give the same answers, or the server would rank an API release otherwise than a checkout's."""

from __future__ import annotations

import pytest

from detective_client import head
from risk import suspects

SOURCES = {
    "tests/test_timed.py": (
        "import os\nfrom payments.timed import max_age_ok, grace\nfrom . import helpers\n"
    ),
    "src/test/java/org/x/FooTest.java": "package org.x;\nimport org.x.util.Bar;\n"
    "import static org.junit.Assert.*;\n",
    "web/cart.test.ts": "import { add } from './lib/add';\nconst y = require('../y.js');\n",
    "tests/test_broken.py": "def (:",
}


@pytest.mark.parametrize("path", sorted(SOURCES))
def test_both_read_the_same_imports(path: str) -> None:
    assert head.imported_names(path, SOURCES[path]) == suspects.imported_names(path, SOURCES[path])


@pytest.mark.parametrize(
    "path",
    [
        "tests/test_cart.py",
        "shop/cart_test.py",
        "pkg/x_test.go",
        "src/test/java/org/x/FooTest.java",
        "src/it/java/org/x/FooIT.java",
        "web/__tests__/cart.js",
        "web/cart.spec.tsx",
        "shop/cart.py",
        "src/main/java/org/x/Foo.java",
        "testing/helpers.py",
        "docs/test.md",
    ],
)
def test_both_call_the_same_source_files_tests(path: str) -> None:
    if path.endswith(".md"):  # the client reads sources only: a document is no test to read
        assert not head.looks_like_test(path)
        return
    assert head.looks_like_test(path) == suspects.is_test_file(path)


def test_both_read_the_same_functions() -> None:
    source = (
        "class Signer:\n    def unsign(self, value):\n        raise SignatureExpired(value)\n\n"
        "async def fetch(url):\n    return await get(url)\n"
    )
    mine = [suspects.sent_scope(s, e, w) for s, e, w in head.python_scopes(source)]
    theirs = suspects.python_scopes(source)
    assert mine == theirs
