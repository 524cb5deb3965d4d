from __future__ import annotations

from traces.otlp.grouping import group_of, normalised_message

STACK = """Traceback (most recent call last):
  File "/srv/venv/lib/python3.12/site-packages/flask/app.py", line {lib}, in dispatch_request
    return self.view_functions[rule.endpoint](**view_args)
  File "/srv/{root}/shop/views.py", line {view}, in cart_total
    return {{"total": line_total(cart)}}
  File "/srv/{root}/shop/pricing.py", line {line}, in line_total
    return price / quantity
ZeroDivisionError: division by zero
"""


def stack(line: int = 12, view: int = 30, root: str = "app", lib: int = 880) -> str:
    return STACK.format(line=line, view=view, root=root, lib=lib)


def test_the_same_code_path_is_one_group_whatever_the_lines_numbers_and_deploy_directory() -> None:
    first = group_of("ZeroDivisionError", "division by zero", stack())
    moved = group_of("ZeroDivisionError", "division by zero", stack(40, 77, "release-2", 900))
    assert first.fingerprint == moved.fingerprint
    assert first.culprit is not None
    assert (first.culprit.path.endswith("shop/pricing.py"), first.culprit.function) == (
        True,
        "line_total",
    )
    # The library's frame is not the application's.
    assert [f.function for f in first.frames] == ["cart_total", "line_total"]


def test_another_type_or_function_is_another_group() -> None:
    base = group_of("ZeroDivisionError", "", stack()).fingerprint
    assert group_of("ValueError", "", stack()).fingerprint != base
    other = stack().replace("in line_total", "in unit_price")
    assert group_of("ZeroDivisionError", "", other).fingerprint != base


def test_without_frames_the_message_counts_but_not_its_numbers() -> None:
    one = group_of("KeyError", "cart 1234 has no item 0x1f", "")
    two = group_of("KeyError", "cart 98 has no item 0xff", "")
    assert one.fingerprint == two.fingerprint
    assert group_of("KeyError", "user 3 is gone", "").fingerprint != one.fingerprint
    assert normalised_message("id 5f1b2c3d-aaaa-bbbb-cccc-0123456789ab at 3.5") == "id <n> at <n>"
