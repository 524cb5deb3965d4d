"""The scenarios made of a git history: replayed, ingested as `manage.py ingest --git-repo`
ingests a release, their culprit found, and the policy's evidence naming it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from evals import scenario_git, scenario_sources
from evals.evaluators.culprit_named import names_commit
from evals.scenario import DEFAULT_SUITE_DIR, ScenarioError, Suite, load_suite, parse_scenario
from releases.models import Release
from sources import judging
from sources.models import Ingestion, TestCase

pytestmark = pytest.mark.django_db

CULPRITS = {
    "culprit_python_remote_surcharge": (
        "Charge the remote-area surcharge by postcode prefix",
        "parcel/rates.py line 39",
        4,
    ),
    "culprit_java_reservation_off_by_one": (
        "Reserve order lines in one pass and put back on a shortage",
        "src/main/java/com/northwind/inventory/StockLedger.java line 30",
        2,
    ),
    "culprit_js_category_coupon": (
        "Let a percentage coupon name the categories it applies to",
        "src/coupons.js line 9",
        1,
    ),
}


@pytest.fixture(scope="module")
def suite() -> Suite:
    return load_suite(pattern="tag:culprit")


def test_the_culprit_scenarios_are_the_three_of_the_suite(suite: Suite) -> None:
    assert sorted(suite.ids) == sorted(CULPRITS)
    for scenario in suite.scenarios:
        assert scenario.sources is not None and scenario.sources.has_history
        assert scenario.expect.culprit == CULPRITS[scenario.id][0]


def test_a_history_replays_to_the_same_commits_every_time(suite: Suite, tmp_path: Path) -> None:
    scenario = suite.get("culprit_python_remote_surcharge")
    assert scenario.sources is not None
    directory = Path(scenario.sources.directory)
    first = scenario_git.build(directory, scenario.sources.releases, tmp_path / "a")
    scenario_git.build(directory, scenario.sources.releases, tmp_path / "b")
    assert first == {"v1.4.0": "v1.4.0", "v1.5.0": "v1.4.0..v1.5.0"}
    heads = [scenario_git._git(tmp_path / r, "rev-parse", "v1.5.0").strip() for r in "ab"]
    assert heads[0] == heads[1]
    subjects = scenario_git._git(tmp_path / "a", "log", "--format=%s", "v1.4.0..v1.5.0")
    assert subjects.splitlines() == [
        "Log each quote at debug level",
        "Document the zone table in the README",
        "Charge the remote-area surcharge by postcode prefix",
        "Bump httpx from 0.27.0 to 0.27.2",
        "Add an eu-adjacent zone for Norway and Switzerland",
    ]


@pytest.mark.parametrize("scenario_id", sorted(CULPRITS))
def test_ingested_the_policy_names_the_culprit_first_and_it_is_not_the_newest(
    suite: Suite, scenario_id: str
) -> None:
    subject, where, failures = CULPRITS[scenario_id]
    scenario = suite.get(scenario_id)
    release = scenario_sources.ingest_scenario(scenario)
    culprit = scenario_sources.culprit_of(scenario, release)
    assert culprit is not None and culprit.subject == subject
    # As `manage.py ingest --git-repo` records a release.
    assert release.git_to_ref == release.version and release.head_sha
    commits = list(release.commits.order_by("-authored_at"))
    assert len(commits) == 5 and commits[0].sha != culprit.sha
    assert any("[bot]" in c.author_name for c in commits)
    failed = TestCase.objects.filter(release=release, status__in=["failed", "error"])
    assert failed.count() == failures
    for case in failed:
        assert case.suspects["ranked"][0]["sha"] == culprit.sha, case.name
    evidence = judging.judge_release(release).for_agent()["policy"]["evidence"]
    sentence = [s for s in evidence if where in s]
    assert len(sentence) == 1 and names_commit(sentence[0], culprit) == culprit.sha[:7]


def test_ingesting_again_stores_nothing_new(suite: Suite) -> None:
    scenario = suite.get("culprit_js_category_coupon")
    release = scenario_sources.ingest_scenario(scenario)
    counts = (Ingestion.objects.count(), TestCase.objects.count(), Release.objects.count())
    again = scenario_sources.ingest_scenario(scenario)
    assert again.pk == release.pk
    assert (Ingestion.objects.count(), TestCase.objects.count(), Release.objects.count()) == counts


def test_a_culprit_rule_that_names_no_commit_is_refused_before_any_trial(suite: Suite) -> None:
    scenario = suite.get("culprit_js_category_coupon")
    wrong = scenario.model_copy(
        update={"expect": scenario.expect.model_copy(update={"culprit": "Fix everything"})}
    )
    with pytest.raises(scenario_sources.ScenarioFilesError, match=r"names no commit of v3\.13\.0"):
        scenario_sources.ingest_suite(suite.model_copy(update={"scenarios": [wrong]}))
    release = scenario_sources.ingest_scenario(scenario)
    sha = release.commits.get(message__startswith="Let a percentage").sha
    by_sha = scenario.model_copy(
        update={"expect": scenario.expect.model_copy(update={"culprit": sha[:8]})}
    )
    found = scenario_sources.culprit_of(by_sha, release)
    assert found is not None and found.sha == sha


def _copy(scenario_id: str, into: Path) -> Path:
    shutil.copy(DEFAULT_SUITE_DIR / "suite.toml", into)
    shutil.copy(DEFAULT_SUITE_DIR / f"{scenario_id}.toml", into)
    shutil.copytree(DEFAULT_SUITE_DIR / "files" / scenario_id, into / "files" / scenario_id)
    return into / "files" / scenario_id


def test_a_history_folder_without_patches_is_named(tmp_path: Path) -> None:
    files = _copy("culprit_js_category_coupon", tmp_path)
    for patch in (files / "history" / "v3.13.0").glob("*.patch"):
        patch.unlink()
    with pytest.raises(ScenarioError, match=r"no patch in files/culprit_js_category_coupon/hi"):
        load_suite(tmp_path)


def test_a_patch_that_does_not_apply_is_named_and_stores_nothing(tmp_path: Path) -> None:
    files = _copy("culprit_js_category_coupon", tmp_path)
    first = sorted((files / "history" / "v3.12.0").glob("*.patch"))[0]
    first.unlink()  # it created package.json, which a patch of v3.13.0 changes
    scenario = load_suite(tmp_path).scenarios[0]
    with pytest.raises(
        scenario_sources.ScenarioFilesError,
        match=r"release v3\.13\.0: git am: error: package\.json",
    ):
        scenario_sources.ingest_scenario(scenario)
    assert not Release.objects.exists()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"commits": "x.json"}, "either commits"),
        ({"history": None}, "every release of sources.releases has a history"),
    ],
)
def test_a_history_is_all_or_nothing_and_never_beside_commits(
    suite: Suite, change: dict[str, object], message: str
) -> None:
    data = suite.get("culprit_js_category_coupon").model_dump(mode="json")
    data["sources"]["releases"][0].update(change)
    del data["sources"]["digest"]
    with pytest.raises(ScenarioError, match=message):
        parse_scenario(data)


def test_a_culprit_needs_a_scenario_made_of_files() -> None:
    data = load_suite(pattern="high_auth_single_failure").scenarios[0].model_dump(mode="json")
    data["expect"]["culprit"] = "Rewrite session token validation"
    with pytest.raises(ScenarioError, match="culprit needs a scenario made of files"):
        parse_scenario(data)


def test_every_scenario_asks_about_a_release_of_its_own() -> None:
    # A model double (and a reader of a run's transcripts) tells scenarios apart by the
    # release the prompt names.
    ids = [scenario.release_id for scenario in load_suite().scenarios]
    assert len(ids) == len(set(ids))
