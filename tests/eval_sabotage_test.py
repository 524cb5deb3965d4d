"""The sabotage check (issue 40, item 5): evals that can still fail.

The eval runner (`manage.py run_evals`, K = 3 trials a scenario) is run against scripted bad
agents over the HTTP wire (`tests.eval_agents`), each one fault played on every scenario, and
compared with a good baseline: the comparison must FAIL for every one. A/A, the same good agent
run again, must never fail. Measured on the local model before this check: the comparison
passed the agent that appends unknown evidence keys, which is what the real model did.

Prints each run's figures (pass rate, verdict, regressions); `docs/developing/
verdicts-measured.md` keeps them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from io import StringIO

import pytest
import respx
from django.core.management import CommandError, call_command

from evals import selectors
from evals.models import EvalRun
from tests.eval_agents import MODEL, SABOTAGE, ScriptedAgent

pytestmark = pytest.mark.django_db(transaction=True)

LLM_URL = "http://llm.test/v1"
K = 3
# The scenarios each sabotage has something to spoil in: culprits, history, drill-downs, the
# three severities, and the policy's evidence.
SCENARIOS = ",".join(
    [
        "culprit_python_remote_surcharge",
        "culprit_js_category_coupon",
        "error_rate_against_history",
        "new_failure_after_payment_change",
        "revert_brings_failure_back",
        "high_payment_failures",
        "medium_elevated_error_rate",
        "low_clean_docs",
    ]
)
# A/A repeats: 20 in the measured run (DETECTIVE_SABOTAGE_AA=20), fewer by default to keep the
# test's cost near the other eval tests'.
AA_REPEATS = int(os.environ.get("DETECTIVE_SABOTAGE_AA", "2"))


@pytest.fixture
def llm() -> Iterator[respx.MockRouter]:
    with respx.mock(assert_all_called=False) as router:
        yield router


def run_evals(router: respx.MockRouter, agent: ScriptedAgent, *args: str) -> tuple[EvalRun, str]:
    router.routes.clear()
    router.post(f"{LLM_URL}/chat/completions").mock(side_effect=agent)
    out = StringIO()
    try:
        call_command(
            "run_evals",
            f"--trials={K}",
            f"--scenarios={SCENARIOS}",
            "--concurrency=6",
            "--tool-timeout=20",
            "--provider=openai-compatible",
            f"--model={MODEL}",
            f"--base-url={LLM_URL}",
            *args,
            stdout=out,
        )
    except CommandError as exc:
        out.write(f"\n[exit {exc.returncode}]")
    return EvalRun.objects.latest("created_at", "id"), out.getvalue()


def figures(name: str, run: EvalRun, baseline: EvalRun | None) -> tuple[str | None, str]:
    """(the comparison's verdict, a line of figures) for one run."""
    summary = run.run_summary()
    assert summary is not None
    rate = f"{name}: pass rate {run.pass_rate:.0%}, errored {summary.errored}"
    if baseline is None:
        return None, rate
    comparison = selectors.compare(run, baseline)
    regressions = ", ".join(sorted({r.key for r in comparison.regressions}))
    return comparison.verdict, f"{rate}, verdict {comparison.verdict}: {regressions or '-'}"


def test_every_sabotaged_agent_fails_the_comparison_and_a_a_never_does(
    llm: respx.MockRouter, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline, out = run_evals(llm, ScriptedAgent("good"), "--baseline")
    assert baseline.pass_rate == 1.0, out
    # The good agent adds a sentence of its own to the policy's evidence in each report.
    own = re.search(r"The model's own words \(default profile\): (\d+)% of", out)
    assert own is not None and 0 < int(own.group(1)) < 100, out
    lines = [figures("baseline (good)", baseline, None)[1] + f", own words {own.group(1)} %"]
    verdicts: dict[str, str | None] = {}
    agents = [
        (fault, ScriptedAgent("good", faults=dict.fromkeys(SCENARIOS.split(","), fault)))
        for fault in SABOTAGE
    ]
    agents += [(f"A/A {n}", ScriptedAgent("good")) for n in range(1, AA_REPEATS + 1)]
    for name, agent in agents:
        run, out = run_evals(llm, agent, "--compare")
        verdicts[name], line = figures(name, run, baseline)
        lines.append(line)
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert {f: verdicts[f] for f in SABOTAGE} == dict.fromkeys(SABOTAGE, "fail")
    assert all(verdicts[f"A/A {n}"] != "fail" for n in range(1, AA_REPEATS + 1)), verdicts
