"""Issue 37, item 9: the CI summary of a real assessment is read in ten seconds. Releases sent
as a team's CI sends them (git range, JUnit XML, exporter metrics), assessed by the scripted
model, their verdicts read from the API as the client reads them: the Markdown has a headline
(severity, why, what to do), at most five findings, each failing test named once with its
first suspect, links to the release and review pages, no grounding lines, code that renders;
≤ 150 words for a clean release. `manage.py verdict --markdown` writes the same summary."""

from __future__ import annotations

import html
import io
import re
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from markdown_it import MarkdownIt

from detective_client import summary
from detective_client import verdict as gate
from tests import ci_summary_data
from tests.assessment_test import _close_thread_connections, assess  # noqa: F401
from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)
API_KEY = "k" * 40
RENDER = MarkdownIt("commonmark").enable("table")


def verdict_json(version: str, service: str) -> dict[str, Any]:
    answer = Client().get(
        f"/api/releases/{version}/verdict",
        {"service": service},
        headers={"Authorization": f"Bearer {API_KEY}"},
    )
    assert answer.status_code == 200, answer.content
    return answer.json()


def client_summary(version: str, service: str, fail_on: str = "high") -> tuple[int, str]:
    """What `detective verdict --markdown` writes for the API's answer."""
    answer = verdict_json(version, service)
    code = gate.exit_code(answer, fail_on)
    return code, summary.markdown(answer, service, code, fail_on)


def command_summary(version: str, service: str) -> tuple[int, str]:
    out = io.StringIO()
    with pytest.raises(SystemExit) as ended:
        call_command("verdict", version, "--service", service, "--markdown", "-", stdout=out)
    # Its one line first, then the summary.
    return int(ended.value.code or 0), out.getvalue().split("\n", 1)[1]


def words(markdown: str) -> int:
    """Words a reader sees: the Markdown rendered, its tags dropped."""
    return len(html.unescape(re.sub(r"<[^>]+>", " ", RENDER.render(markdown))).split())


def findings(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if re.match(r"\d+\. ", line)]


def test_a_clean_release_and_one_with_five_new_failures_read_in_ten_seconds(
    tmp_path: Path, settings: Any
) -> None:
    settings.DETECTIVE_API_KEY = API_KEY
    clean = ci_summary_data.clean(tmp_path)
    failing, culprits = ci_summary_data.five_failing(tmp_path)
    waiting, _ = ci_summary_data.five_failing(tmp_path, service="storefront")
    with ScriptedLLM() as llm:
        assess(clean, llm.base_url)
        assess(failing, llm.base_url)
    with ScriptedLLM(mode="always-low") as llm:
        assess(waiting, llm.base_url)

    code, text = client_summary("v1.1.0", "catalog")
    assert code == 0, text
    assert words(text) <= 150, (words(text), text)
    assert text.startswith("### ✅ Detective: catalog v1.1.0: Low risk")
    assert "**Why:** No signal of risk in the policy's 7 checks." in text
    assert "**What to do:** nothing: the release passes the gate." in text
    assert 1 <= len(findings(text)) <= summary.MOST_FINDINGS
    assert "its own sentence" not in text and "=" not in text
    assert f"[Release page]({clean_url(clean)})" in text
    assert command_summary("v1.1.0", "catalog")[1].replace("http://testserver", "") == (
        text.replace("http://testserver", "")
    )

    code, text = client_summary("v1.2.0", "catalog", fail_on="medium")
    assert code == gate.AT_OR_ABOVE, text
    assert words(text) <= 150, (words(text), text)
    assert "**Why:** Medium from failed tests (5)" in text
    assert len(findings(text)) <= summary.MOST_FINDINGS
    for name, sha in culprits.items():
        test = f"test_{name}_is_kept"
        assert text.count(test) == 1, (test, text)
        assert f"- `{test}`: `{sha[:9]}` Round {name} up (`catalog/{name}.py`)" in text
    # The code spans render as code, nothing escaped shows.
    rendered = RENDER.render(text)
    assert "<code>test_price_is_kept</code>" in rendered and "\\" not in rendered
    assert "its own sentence" not in text

    code, text = client_summary("v1.2.0", "storefront")
    assert code == gate.WAITS_FOR_PERSON, text
    answer = verdict_json("v1.2.0", "storefront")
    review = f"http://testserver/review/#queue-item-{answer['report_id']}"
    assert f"decide on the [review page]({review})" in text
    assert f"[Review item]({review})" in text
    assert (
        "**Why:** A person must decide (severity low is below the policy's medium): medium from "
        "failed tests (5)"
    ) in text
    assert words(text) <= 150, (words(text), text)
    assert all(text.count(f"test_{name}_is_kept") == 1 for name in culprits), text
    command_code, command_text = command_summary("v1.2.0", "storefront")
    assert command_code == gate.WAITS_FOR_PERSON
    assert f"/review/#queue-item-{answer['report_id']})" in command_text


def clean_url(release: Any) -> str:
    return f"http://testserver{release.get_absolute_url()}"
