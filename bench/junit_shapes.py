"""A mixed JUnit XML report for the readers' benchmark (issue 39, item 4): the shapes real tools
write, one after another in one file, so no reader is measured on one tool's habits only.

A third each, by suite:
- pytest (`junit_family=xunit1`): a root `testsuite` per run is not possible in one file, so a
  `testsuite name="pytest"` with its `properties`, cases with `file` and `line`, a failure every
  10th (`message` and a Python traceback as text), a skip every 25th (`pytest.skip`), an xfail
  every 50th, `system-out` and `system-err` on the failures;
- Surefire: a suite per class with the JVM's `properties`, a failure with its Java stack every
  20th, a flaky rerun every 50th (`flakyFailure` with its `stackTrace`), `system-out` per case;
- jest-junit: a suite per test file (its path as the name), `classname` and `name` the test's
  title, a failure every 15th as text only (jest-junit writes no `message`), with node's stack.
"""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

PER_SUITE = 200

_PY_TRACEBACK = (
    "def test_places_order(client, cart):\n"
    "        response = client.post(&quot;/orders&quot;, json=cart.payload())\n"
    "&gt;       assert response.status_code == 201\n"
    "E       assert 500 == 201\n"
    "E        +  where 500 = &lt;Response [500]&gt;.status_code\n\n"
    "tests/orders/test_checkout.py:{line}: AssertionError"
)
_JAVA_STACK = (
    "org.opentest4j.AssertionFailedError: expected: &lt;90&gt; but was: &lt;80&gt;\n"
    + "\tat com.example.shop.OrderServiceTest.placesOrder(OrderServiceTest.java:58)\n" * 12
)
_NODE_STACK = (
    "Error: expect(received).toBe(expected) // Object.is equality\n\n"
    "Expected: 3\nReceived: 2\n"
    + "    at Object.&lt;anonymous&gt; (/home/runner/work/app/src/cart.test.js:42:17)\n"
    * 6
)
_JVM_PROPERTIES = "".join(
    f'      <property name="{name}" value="{value}"/>\n'
    for name, value in (
        ("java.version", "17.0.9"),
        ("java.vendor", "Eclipse Adoptium"),
        ("os.name", "Linux"),
        ("user.dir", "/home/runner/work/shop/shop"),
        ("surefire.test.class.path", "/home/runner/.m2/repository/org/junit/" * 6),
    )
)
_OUTPUT = "starting step {n} of the scenario; fixtures loaded from tests/fixtures/orders.json\n"


def _pytest_suite(out: TextIO, first: int, count: int) -> None:
    out.write(
        f'  <testsuite name="pytest" errors="0" failures="0" skipped="0" tests="{count}" '
        'time="12.5" timestamp="2026-11-29T07:00:00" hostname="runner">\n'
        '    <properties><property name="python" value="3.12.7"/>'
        '<property name="plugins" value="xdist-3.6.1, cov-6.0.0"/></properties>\n'
    )
    for number in range(first, first + count):
        module = f"tests.orders.test_checkout{number // PER_SUITE}"
        out.write(
            f'    <testcase classname="{module}" name="test_places_order[case{number}]" '
            f'file="tests/orders/test_checkout.py" line="{number % 400}" '
            f'time="0.{number % 997:03d}">\n'
        )
        if number % 10 == 0:
            out.write(
                '      <failure message="assert 500 == 201">'
                + _PY_TRACEBACK.format(line=number % 400)
                + "</failure>\n"
                f"      <system-out>{_OUTPUT.format(n=number) * 3}</system-out>\n"
                "      <system-err>WARNING  urllib3 retrying (1/3)</system-err>\n"
            )
        elif number % 50 == 5:
            out.write('      <skipped type="pytest.xfail" message="flaky upstream, see #1234"/>\n')
        elif number % 25 == 3:
            out.write(
                '      <skipped type="pytest.skip" message="needs PostgreSQL">'
                "tests/orders/test_checkout.py:12: needs PostgreSQL</skipped>\n"
            )
        out.write("    </testcase>\n")
    out.write("  </testsuite>\n")


def _surefire_suite(out: TextIO, first: int, count: int) -> None:
    klass = f"com.example.shop.module{first // PER_SUITE}.OrderServiceTest"
    out.write(
        f'  <testsuite name="{klass}" tests="{count}" failures="0" errors="0" '
        f'skipped="0" time="12.5">\n    <properties>\n{_JVM_PROPERTIES}    </properties>\n'
    )
    for number in range(first, first + count):
        out.write(
            f'    <testcase name="placesOrderWithDiscount{number}" classname="{klass}" '
            f'time="0.{number % 997:03d}">\n'
        )
        if number % 20 == 0:
            out.write(
                '      <failure message="expected: &lt;90&gt; but was: &lt;80&gt;" '
                f'type="org.opentest4j.AssertionFailedError">{_JAVA_STACK}</failure>\n'
            )
        elif number % 50 == 1:
            out.write(
                '      <flakyFailure message="Read timed out" '
                'type="java.net.SocketTimeoutException"><stackTrace>'
                "java.net.SocketTimeoutException: Read timed out\n\tat java.base/"
                "java.net.SocketInputStream.read(SocketInputStream.java:168)</stackTrace>"
                "<system-out>retrying</system-out></flakyFailure>\n"
            )
        out.write(f"      <system-out><![CDATA[{_OUTPUT.format(n=number)}]]></system-out>\n")
        out.write("    </testcase>\n")
    out.write("  </testsuite>\n")


def _jest_suite(out: TextIO, first: int, count: int) -> None:
    path = f"src/cart/cart{first // PER_SUITE}.test.js"
    out.write(
        f'  <testsuite name="{path}" errors="0" failures="0" skipped="0" '
        f'timestamp="2026-11-29T07:00:00" time="3.2" tests="{count}">\n'
    )
    for number in range(first, first + count):
        title = f"Cart totals adds the discount for basket {number}"
        out.write(f'    <testcase classname="{title}" name="{title}" time="0.{number % 97:03d}"')
        if number % 15 == 0:
            out.write(f">\n      <failure>{_NODE_STACK}</failure>\n    </testcase>\n")
        else:
            out.write(">\n    </testcase>\n")
    out.write("  </testsuite>\n")


_SHAPES = (_pytest_suite, _surefire_suite, _jest_suite)


def write_mixed_report(path: Path, cases: int) -> int:
    """The report, `cases` test cases in suites of 200; its size in bytes."""
    with path.open("w", encoding="utf-8") as out:
        out.write('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="mixed">\n')
        for index, first in enumerate(range(0, cases, PER_SUITE)):
            _SHAPES[index % len(_SHAPES)](out, first, min(PER_SUITE, cases - first))
        out.write("</testsuites>\n")
    return path.stat().st_size
