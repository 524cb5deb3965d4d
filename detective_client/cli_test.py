"""`python -m detective_client` against the local HTTP double (conftest.py): what it sends,
what it refuses to send, and the verdict's exit codes."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from detective_client.cli import main, parser, pipeline_url
from detective_client.conftest import TOKEN, Double

PROJECT = Path(__file__).resolve().parents[1]


def verdict_json(state: str, severity: str | None, **extra: Any) -> dict[str, Any]:
    return {
        "version": "1.4.0",
        "state": state,
        "state_label": state.replace("_", " "),
        "severity": severity,
        "model_severity": severity,
        "policy_severity": None,
        "policy_version": 3,
        "decision": None,
        "findings": [],
        "summary": "",
        "review_reasons": [],
        **extra,
    }


def run(double: Double | None, *argv: str, **env: str) -> tuple[int, str, str]:
    environment = {"DETECTIVE_TOKEN": TOKEN, **env}
    if double is not None:
        environment.setdefault("DETECTIVE_URL", double.url)
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), environment=environment, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def sh(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=CI", "-c", "user.email=ci@example.com", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    sh(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("one\n")
    sh(repo, "add", ".")
    sh(repo, "commit", "-q", "-m", "feat: one")
    sh(repo, "tag", "v1.3.0")
    (repo / "a.txt").write_text("one\ntwo\n")
    sh(repo, "commit", "-q", "-am", "fix(a): two")
    (repo / "b.txt").write_text("b\n")
    sh(repo, "add", ".")
    sh(repo, "commit", "-q", "-m", "feat(b)!: b")
    sh(repo, "tag", "v1.4.0")
    return repo


@pytest.fixture
def reports(tmp_path: Path) -> Path:
    folder = tmp_path / "reports"
    folder.mkdir()
    (folder / "unit.xml").write_text(
        '<testsuite name="u" tests="1"><testcase name="t"/></testsuite>'
    )
    (folder / "e2e.xml").write_text(
        '<testsuite name="e" tests="1"><testcase name="x"/></testsuite>'
    )
    return folder


# ---- ingest ------------------------------------------------------------------------------------


def test_ingest_sends_the_release_and_every_source_in_one_request(
    double: Double, checkout: Path, reports: Path, tmp_path: Path
) -> None:
    metrics = tmp_path / "metrics.txt"
    metrics.write_text('http_requests_total{code="500"} 3\n# EOF\n')
    code, _, err = run(
        double,
        "ingest", "1.4.0", "--service", "shop", "--environment", "production",
        "--git-repo", str(checkout), "--git-range", "v1.3.0..v1.4.0",
        "--junit", str(reports), "--metrics-file", str(metrics),
        "--deployed-at", "2026-11-24T10:00:00Z", "--assess",
        GITHUB_SERVER_URL="https://github.com", GITHUB_REPOSITORY="acme/shop", GITHUB_RUN_ID="42",
    )  # fmt: skip
    assert code == 0, err
    assert double.paths() == ["POST /api/releases/bundle", "POST /api/releases/1.4.0/assess"]
    [bundle] = double.bundles
    head = sh(checkout, "rev-parse", "v1.4.0")
    release = json.loads(bundle["release"][0][1])
    assert release == {
        "service": "shop",
        "version": "1.4.0",
        "environment": "production",
        "git": {"from_ref": "v1.3.0", "to_ref": "v1.4.0", "head_sha": head},
        "pipeline_url": "https://github.com/acme/shop/actions/runs/42",
        "deployed_at": "2026-11-24T10:00:00+00:00",
    }  # fmt: skip
    commits = json.loads(bundle["commits"][0][1])["commits"]
    assert [c["message"] for c in commits] == ["feat(b)!: b", "fix(a): two"]
    assert all(r.headers["Authorization"] == f"Bearer {TOKEN}" for r in double.received)
    assert [name for name, _ in bundle["junit"]] == ["e2e.xml", "unit.xml"]
    assert bundle["junit"][1][1] == (reports / "unit.xml").read_bytes()
    assert bundle["metrics"] == [("metrics.txt", metrics.read_bytes())]
    assert "stored whole: release shop 1.4.0 created" in err
    assert "  junit unit.xml: new" in err
    assert "assessment queued: /runs/r1/" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--junit", "absent.xml"], "the JUnit file absent.xml does not exist"),
        (["--git-range", "v1.3.0..v9"], "the ref 'v9' does not exist"),
        # Swapped refs (a rebuild, both refs the same commit, is a release: git_test.py).
        (["--git-range", "v1.4.0..v1.3.0"], "holds no commits"),
        (["--metrics-file", "none.txt"], "the metrics file none.txt does not exist"),
        (["--deployed-at", "2026-11-24 10:00"], "needs a UTC offset"),
        (["--deployed-at", "monday"], "is not an ISO 8601 time"),
    ],
)
def test_ingest_sends_nothing_when_a_source_is_wrong(
    double: Double, checkout: Path, argv: list[str], message: str
) -> None:
    code, _, err = run(
        double, "ingest", "1.4.0", "--service", "shop", "--git-repo", str(checkout), *argv
    )
    assert code == 1
    assert message in err
    assert double.received == []


def test_ingest_shows_the_servers_reason_for_a_refusal(double: Double, reports: Path) -> None:
    double.refuse[("POST", "/bundle")] = (
        400,
        {"error": "unit.xml line 3: not well-formed", "file": "unit.xml", "line": 3},
    )
    code, _, err = run(double, "ingest", "1.4.0", "--service", "shop", "--junit", str(reports))
    assert code == 1
    assert "stored nothing of shop 1.4.0: POST api/releases/bundle answered 400: unit.xml" in err
    assert '"line": 3' in err


def test_ingest_without_a_token_or_with_a_wrong_one(double: Double) -> None:
    code, _, err = run(double, "ingest", "1.4.0", "--service", "shop", DETECTIVE_TOKEN="")
    assert (code, double.received) == (1, [])
    assert "set DETECTIVE_TOKEN" in err
    code, _, err = run(double, "ingest", "1.4.0", "--service", "shop", DETECTIVE_TOKEN="stale")
    assert code == 1
    assert "answered 401: a valid ingestion token is required" in err


def test_the_pipeline_url_comes_from_gitlab_too() -> None:
    assert pipeline_url({"CI_PIPELINE_URL": "https://gitlab.com/a/b/-/pipelines/7"}) == (
        "https://gitlab.com/a/b/-/pipelines/7"
    )
    assert pipeline_url({}) is None


# ---- verdict -----------------------------------------------------------------------------------


@pytest.fixture
def known(double: Double) -> Double:
    double.releases[("shop", "1.4.0")] = {"service": "shop", "version": "1.4.0"}
    return double


@pytest.mark.parametrize(
    ("state", "severity", "fail_on", "expected"),
    [
        ("assessed", "low", "high", 0),
        ("assessed", "medium", "high", 0),
        ("assessed", "high", "high", 1),
        ("assessed", "medium", "medium", 1),
        ("assessed", "low", "medium", 0),
        ("decided", "high", "high", 1),
        ("decided", "low", "medium", 0),
        ("needs_person", "high", "high", 2),
        ("needs_person", "low", "high", 2),
        ("failed", None, "high", 3),
        ("not_assessed", None, "high", 3),
        ("running", "low", "high", 3),
    ],
)
def test_the_exit_code_follows_the_verdict(
    known: Double, state: str, severity: str | None, fail_on: str, expected: int
) -> None:
    known.verdicts = [(200, verdict_json(state, severity))]
    code, out, _ = run(known, "verdict", "1.4.0", "--service", "shop", "--fail-on", fail_on)
    assert code == expected
    assert f"shop 1.4.0: severity {severity or 'none'}" in out
    assert f"(exit {expected})" in out
    [asked] = known.received
    assert (asked.method, asked.path, asked.query) == (
        "GET",
        "/api/releases/1.4.0/verdict",
        {"service": "shop"},
    )


def test_wait_asks_again_until_the_run_ends(known: Double) -> None:
    known.verdicts = [
        (200, verdict_json("not_assessed", None)),
        (200, verdict_json("running", None)),
        (200, verdict_json("assessed", "high")),
    ]
    code, _, _ = run(
        known, "verdict", "1.4.0", "--service", "shop", "--wait", "30", "--interval", "0.01"
    )
    assert code == 1
    assert len(known.received) == 3


def test_a_wait_that_runs_out_is_no_verdict(known: Double) -> None:
    known.verdicts = [(200, verdict_json("running", None))]
    code, _, err = run(
        known, "verdict", "1.4.0", "--service", "shop", "--wait", "0.2", "--interval", "0.05"
    )
    assert code == 3
    assert "still running after 0.2 s" in err
    assert len(known.received) >= 2


def test_an_unknown_release_is_no_verdict(known: Double) -> None:
    code, _, err = run(known, "verdict", "9.9.9", "--service", "shop")
    assert code == 3
    assert "no verdict: no release 9.9.9 of 'shop'" in err


def test_a_server_error_is_no_verdict_with_its_reason(known: Double) -> None:
    known.verdicts = [(500, {"error": "database is locked"})]
    code, _, err = run(known, "verdict", "1.4.0", "--service", "shop")
    assert code == 3
    assert "answered 500: database is locked" in err


def test_an_unreachable_server_is_no_verdict_with_a_clear_message() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code, _, err = run(
        None, "verdict", "1.4.0", "--service", "shop", DETECTIVE_URL=f"http://127.0.0.1:{port}"
    )
    assert code == 3
    assert f"cannot reach Detective at http://127.0.0.1:{port}/" in err


def test_json_and_markdown(known: Double, tmp_path: Path) -> None:
    known.verdicts = [
        (
            200,
            verdict_json(
                "needs_person",
                "high",
                findings=[
                    {
                        "text": "Checkout errors tripled",
                        "evidence": ["error_rate 3.1 %"],
                        "problems": [],
                    }
                ],
                review_reasons=["the model and the policy disagree"],
                url="http://detective.example/releases/1.4.0/",
            ),
        )
    ]
    summary = tmp_path / "verdict.md"
    code, out, _ = run(
        known, "verdict", "1.4.0", "--service", "shop", "--json", "--markdown", str(summary)
    )
    assert code == 2
    assert json.loads(out)["findings"][0]["text"] == "Checkout errors tripled"
    text = summary.read_text()
    assert text.startswith(
        "### ⏸️ Detective: shop 1.4.0: High risk · waits for a person's decision (exit 2)\n"
    )
    assert "**Why:** A person must decide: the model and the policy disagree" in text
    # The grounding is the release page's, not the summary's.
    assert "1. Checkout errors tripled\n" in text and "evidence" not in text
    assert "[Release page](http://detective.example/releases/1.4.0/)" in text


def test_python_dash_m_runs_the_client(known: Double) -> None:
    known.verdicts = [(200, verdict_json("assessed", "medium"))]
    done = subprocess.run(
        [sys.executable, "-m", "detective_client", "verdict", "1.4.0", "--service", "shop",
         "--fail-on", "medium"],
        capture_output=True,
        text=True,
        cwd=PROJECT,
        env={"DETECTIVE_URL": known.url, "DETECTIVE_TOKEN": TOKEN, "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "at or above the bar (medium)" in done.stdout


def test_markdown_to_standard_output(known: Double) -> None:
    known.verdicts = [(200, verdict_json("assessed", "low"))]
    code, out, _ = run(known, "verdict", "1.4.0", "--service", "shop", "--markdown", "-")
    assert code == 0
    assert "### ✅ Detective: shop 1.4.0: Low risk · below the bar (high) (exit 0)\n" in out


def test_ingest_prints_the_servers_note_on_the_metrics_window(
    double: Double, tmp_path: Path
) -> None:
    # The server's answer to a metrics file sent without a deploy time carries a note: the
    # figures are then the whole file's, with no baseline, and the client must say so.
    note = "The release has no deploy time, so its metrics have no window: ..."
    part = {"kind": "metrics", "name": "metrics.txt", "created": True, "counts": {"note": note}}
    double.refuse[("POST", "/bundle")] = (201, {"created": True, "parts": [part]})
    metrics = tmp_path / "metrics.txt"
    metrics.write_text('http_requests_total{code="500"} 3\n')
    code, _, err = run(
        double, "ingest", "1.4.0", "--service", "shop", "--metrics-file", str(metrics)
    )
    # The command's progress goes to stderr, the note with it.
    assert code == 0, err
    assert f"    note: {note}" in err


# ---- a summary in every case -------------------------------------------------------------------


def free_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def test_an_unreachable_server_still_writes_the_summary_and_json(tmp_path: Path) -> None:
    summary = tmp_path / "not" / "yet" / "verdict.md"
    url = free_url()
    code, out, err = run(
        None, "verdict", "1.4.0", "--service", "shop", "--json", "--markdown", str(summary),
        DETECTIVE_URL=url,
    )  # fmt: skip
    assert code == 3
    answer = json.loads(out)
    assert (answer["state"], answer["exit_code"]) == ("unavailable", 3)
    assert f"cannot reach Detective at {url}/" in answer["problem"]
    text = summary.read_text()
    assert text.startswith("### ❔ Detective: shop 1.4.0: No verdict · no verdict (exit 3)\n")
    assert f"**What to do:** Detective did not answer at {url}: check that it runs" in text
    assert "check that it runs" in err


@pytest.mark.parametrize(
    ("status", "body", "says"),
    [
        (401, {"error": "Invalid or expired token"}, "Detective refused the token"),
        (403, {"error": "this token sends shop only"}, "Detective refused the token"),
        (404, {"error": "no release 1.4.0 of 'shop'"}, "No such release: send it first"),
        (500, {"error": "database is locked"}, "Detective failed to answer: re-run"),
    ],
)
def test_a_refusal_still_writes_the_summary(
    known: Double, tmp_path: Path, status: int, body: dict[str, str], says: str
) -> None:
    known.verdicts = [(status, body)]
    summary = tmp_path / "verdict.md"
    code, out, _ = run(known, "verdict", "1.4.0", "--service", "shop", "--markdown", str(summary))
    assert code == 3
    text = summary.read_text()
    assert f"**Why:** {body['error'].replace('_', chr(92) + '_')}" in text
    assert says in text
    assert "(exit 3)" in out


def test_no_token_still_writes_the_summary(known: Double, tmp_path: Path) -> None:
    summary = tmp_path / "verdict.md"
    code, _, _ = run(
        known, "verdict", "1.4.0", "--service", "shop", "--markdown", str(summary),
        DETECTIVE_TOKEN="",
    )  # fmt: skip
    assert code == 3
    assert "no token: set DETECTIVE\\_TOKEN" in summary.read_text()
    assert known.received == []


@pytest.mark.parametrize(
    ("state", "says"),
    [
        ("running", "still running after 0.1 s: re-run this job, or give"),
        ("not_assessed", "Never assessed: send it with"),
        ("failed", "The assessment failed: open the release"),
        ("needs_person", "wait-for-decision SECONDS"),
    ],
)
def test_no_verdict_yet_says_what_to_do(
    known: Double, tmp_path: Path, state: str, says: str
) -> None:
    known.verdicts = [(200, verdict_json(state, None))]
    summary = tmp_path / "verdict.md"
    code, _, err = run(
        known, "verdict", "1.4.0", "--service", "shop", "--wait", "0.1", "--interval", "0.05",
        "--markdown", str(summary),
    )  # fmt: skip
    assert code == (2 if state == "needs_person" else 3)
    assert "**What to do:** " in summary.read_text()
    assert says.split(":")[0].replace("`", "") in err.replace("`", "")


@pytest.mark.parametrize(
    "argv",
    [
        ["--wait", "nan"],
        ["--wait", "inf"],
        ["--wait", "-1"],
        ["--wait", "soon"],
        ["--interval", "0"],
        ["--timeout", "-5"],
        ["--no-such-option"],
    ],
)
def test_a_usage_error_has_a_code_of_its_own(known: Double, argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        run(known, "verdict", "1.4.0", "--service", "shop", *argv)
    assert exited.value.code == 64
    assert known.received == []


def test_a_markdown_path_that_cannot_be_made_is_refused_in_one_line(
    known: Double, tmp_path: Path
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, _, err = run(
        known, "verdict", "1.4.0", "--service", "shop", "--markdown", str(blocker / "v.md")
    )
    assert code == 64
    assert err.count("\n") == 1 and "cannot write --markdown" in err
    assert known.received == []


# ---- titles ------------------------------------------------------------------------------------


def sent_release(double: Double) -> dict[str, Any]:
    return json.loads(double.bundles[-1]["release"][0][1])


def test_the_title_is_the_annotated_tags_first_line_or_given(
    double: Double, checkout: Path
) -> None:
    sh(checkout, "tag", "-a", "v1.5.0", "-m", "Faster checkout\n\nThe long story.")
    args = ["ingest", "1.5.0", "--service", "shop", "--git-repo", str(checkout)]
    assert run(double, *args, "--git-range", "v1.3.0..v1.5.0")[0] == 0
    assert sent_release(double)["title"] == "Faster checkout"
    # A lightweight tag has no message: no title.
    assert run(double, *args, "--git-range", "v1.3.0..v1.4.0")[0] == 0
    assert "title" not in sent_release(double)
    assert run(double, *args, "--git-range", "v1.3.0..v1.5.0", "--title", "Given")[0] == 0
    assert sent_release(double)["title"] == "Given"
    code, _, err = run(double, *args, "--title", "x" * 201)
    assert code == 1 and "over 200" in err


# ---- waiting for the person --------------------------------------------------------------------


def test_wait_for_decision_waits_until_a_person_decided(known: Double) -> None:
    decided = verdict_json("decided", "high", decision={"kind": "accept", "by": "rm"})
    known.verdicts = [
        (200, verdict_json("running", None)),
        (200, verdict_json("needs_person", "high")),
        (200, verdict_json("needs_person", "high")),
        (200, verdict_json("needs_person", "high")),
        (200, decided),
    ]
    code, out, err = run(
        known, "verdict", "1.4.0", "--service", "shop", "--wait", "30", "--interval", "0.01",
        "--wait-for-decision", "30",
    )  # fmt: skip
    assert code == 1, err
    assert "severity high, decided" in out
    assert err.count("waiting for a person's decision: ") == 1
    assert f"{known.url}/review/#queue-item-1" in err
    asked = [f"{r.method} {r.path.rsplit('/', 1)[1]}" for r in known.received]
    assert asked == ["GET verdict", "GET verdict", "POST waiting", "GET verdict", "GET verdict"]


def test_wait_for_decision_waits_through_a_reassessment_and_for_its_report(
    known: Double,
) -> None:
    """New data while the job waits for a person: the release is assessed again, and the job
    waits for that verdict, then for the decision on the new report (announced anew)."""
    first, second = {"report_id": 1}, {"report_id": 2}
    decided = verdict_json("decided", "medium", decision={"kind": "accept", "by": "rm"})
    known.verdicts = [
        (200, verdict_json("needs_person", "high", **first)),
        (200, verdict_json("needs_person", "high", **first)),
        (200, verdict_json("running", None)),
        (200, verdict_json("needs_person", "medium", **second)),
        (200, verdict_json("needs_person", "medium", **second)),
        (200, {**decided, **second}),
    ]
    code, out, err = run(
        known, "verdict", "1.4.0", "--service", "shop", "--wait-for-decision", "30",
        "--fail-on", "medium",
    )  # fmt: skip
    assert code == 1, err
    assert "severity medium, decided" in out
    assert err.count("waiting for a person's decision: ") == 2
    asked = [f"{r.method} {r.path.rsplit('/', 1)[1]}" for r in known.received]
    assert asked == [
        "GET verdict", "POST waiting", "GET verdict", "GET verdict", "POST waiting",
        "GET verdict",
    ]  # fmt: skip


def test_plain_wait_does_not_wait_for_the_person(known: Double) -> None:
    known.verdicts = [(200, verdict_json("needs_person", "high"))]
    code, _, _ = run(known, "verdict", "1.4.0", "--service", "shop", "--wait", "30")
    assert code == 2
    assert [r.method for r in known.received] == ["GET"]


def test_a_wait_for_decision_that_runs_out_is_still_waiting(known: Double) -> None:
    known.verdicts = [(200, verdict_json("needs_person", "low"))]
    code, _, err = run(known, "verdict", "1.4.0", "--service", "shop", "--wait-for-decision", "0.6")
    assert code == 2
    assert err.count("waiting for a person's decision") == 1
    # 0.25 s, then 0.35 s left: two more asks, not a busy loop.
    assert 2 <= len([r for r in known.received if r.method == "GET"]) <= 4


def test_verdict_help_lists_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:
        parser({}).parse_args(["verdict", "--help"])
    assert ended.value.code == 0
    shown = capsys.readouterr().out
    for code in ("0 ", "1 ", "2 ", "3 ", "64 "):
        assert f"\n  {code}" in shown
    assert "exit codes:" in shown and "a usage error" in shown
