from __future__ import annotations

import json
from typing import Any

import pytest

from releases.stored_data import StoredListDecoder, StoredObjectDecoder, readable_text


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            '{"error_rate": 0.02, "response_time_p95": 450}',
            {"error_rate": 0.02, "response_time_p95": 450},
        ),
        ('{"error_rate": NaN}', {"error_rate": None}),
        ('{"response_time_p95": Infinity}', {"response_time_p95": None}),
        ('{"response_time_p95": 1e999}', {"response_time_p95": None}),
        ('{"response_time_p95": ' + "9" * 400 + "}", {"response_time_p95": None}),
        ('{"response_time_p95": 1' + "0" * 4999 + "}", None),  # Python cannot even parse it
        ("[" * 3000 + "]" * 3000, None),
        ('{"a": [[[[[1]]]]]}', {"a": [[[None]]]}),
        ("[1, 2]", None),  # a list where an object belongs
        ("not json", None),
        ('{"\\ud800": "a\\u0000b"}', {"\ufffd": "a\ufffdb"}),
    ],
)
def test_an_object_field_reads_whatever_a_row_holds(raw: str, expected: Any) -> None:
    assert json.loads(raw, cls=StoredObjectDecoder) == expected


def test_a_list_field_repairs_text_and_refuses_another_type() -> None:
    assert json.loads('["ok", "\\ud800x"]', cls=StoredListDecoder) == ["ok", "\ufffdx"]
    assert json.loads('{"a": 1}', cls=StoredListDecoder) is None
    assert json.loads("null", cls=StoredListDecoder) is None


def test_repaired_text_encodes() -> None:
    assert readable_text("fine") == "fine"
    readable_text("\ud800 \udfff \x00").encode("utf-8")
