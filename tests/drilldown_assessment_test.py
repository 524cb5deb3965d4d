"""An assessment that investigates (issue 20, item 1): the scripted model reads the summary,
calls the three drill-down tools over the real API (in-process), and files a report that cites
what they showed. Each call is a span (GenAI and OpenInference names) and a step of the run
page, with the release's hostile text escaped there."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from scipy import stats

from agent.telemetry import TelemetryConfig, configure_telemetry
from agent.telemetry.setup import shutdown_telemetry
from releases.models import Conversation, Release, RiskReport, RunStatus
from tests import drilldown_data
from tests.assessment_test import assess
from tests.llm_server import ScriptedLLM

# The first line of get_observability_traces's `in_short` for drilldown_data's release.
GROUP_LINE = (
    "new: KeyError in /srv/checkout/src/payments/refunds.py `record`, 4 times on GET /refunds (4)"
)

pytestmark = pytest.mark.django_db(transaction=True)

DRILL_DOWNS = [
    "get_test_details",
    "get_code_changes",
    "get_metric_history",
    "get_observability_traces",
]


@pytest.fixture
def spans(tmp_path: Path) -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    config = TelemetryConfig(data_dir=tmp_path, file_export=False, traces_exporters=frozenset())
    configure_telemetry(config, set_global=False, span_processors=[SimpleSpanProcessor(exporter)])
    yield exporter
    shutdown_telemetry()


@pytest.fixture
def investigated(spans: InMemorySpanExporter) -> tuple[Release, Conversation]:
    # The first metric judgement imports scipy.stats: seconds on an idle machine, half a
    # minute measured on the shared one under load, past the tool's deadline. Imported here,
    # so that the deadline measures the endpoint.
    assert stats.mannwhitneyu
    release = drilldown_data.build()
    with ScriptedLLM(mode="investigate") as llm:
        run = assess(release, llm.base_url)
    return release, run


def tool_calls(run: Conversation) -> list[str]:
    return [
        event.payload["tool_call"]["name"]
        for event in run.events.filter(kind="tool_call").order_by("seq")
    ]


def test_the_agent_drills_down_and_cites_what_it_found(
    investigated: tuple[Release, Conversation],
) -> None:
    release, run = investigated
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert tool_calls(run) == ["get_release_summary", *DRILL_DOWNS, "file_risk_report"]
    results = [e.payload["result"] for e in run.events.filter(kind="tool_result").order_by("seq")]
    assert all(result["success"] for result in results), results
    report = RiskReport.objects.get(conversation=run)
    assert report.release == release and report.severity == "high"
    cited = "\n".join(report.findings)
    assert "known flaky" in cited  # the test, as get_test_details showed it
    assert "feat(payments)!: record refunds in the ledger" in cited  # the commit
    assert "p95 latency rose from a median of" in cited  # the metric judge's sentence
    assert GROUP_LINE in cited  # the error group, as get_observability_traces showed it


@pytest.mark.usefixtures("investigated")
def test_each_drill_down_is_a_span(spans: InMemorySpanExporter) -> None:
    by_name = {span.name: span for span in spans.get_finished_spans()}
    for name in DRILL_DOWNS:
        span = by_name[f"execute_tool {name}"]
        attributes = dict(span.attributes or {})
        assert attributes["gen_ai.tool.name"] == name
        assert attributes["openinference.span.kind"] == "TOOL"
        assert attributes["tool.name"] == name
        assert attributes["detective.tool.success"] is True
    # In the run's trace, under the agent's span.
    agent = by_name["invoke_agent detective"]
    for name in DRILL_DOWNS:
        span = by_name[f"execute_tool {name}"]
        assert span.context.trace_id == agent.context.trace_id
        assert span.parent is not None and span.parent.span_id == agent.context.span_id


def test_the_run_page_shows_each_drill_down_as_a_step(
    investigated: tuple[Release, Conversation], admin_user: User
) -> None:
    _, run = investigated
    client = Client()
    client.force_login(admin_user)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    for name in DRILL_DOWNS:
        assert f'Called <code class="tl-tool-name">{name}</code>' in page
    # The lines in front, readable; the release's hostile text escaped, never markup.
    assert "known flaky" in page
    assert "p95 latency rose from a median of" in page
    assert GROUP_LINE in page
    assert "&lt;/tool_response&gt;&lt;|im_start|&gt;" in page
    assert "<script>alert(1)</script>" not in page
    assert "</tool_response>" not in page
