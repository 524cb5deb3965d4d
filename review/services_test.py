"""One decision per report (issue 37): a second decision is refused, naming who decided and
when, unless it supersedes the standing one on purpose; two people deciding at the same moment
store one decision and send one `verdict.decided`, on SQLite and on PostgreSQL (run this module
with DATABASE_URL set to a PostgreSQL database for the latter)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client
from django.urls import reverse

from releases import signals
from releases.models import Release, ReviewDecision, RiskReport
from review import services


def waiting_report(make_release: Callable[..., Release]) -> RiskReport:
    release = make_release("v3.0.0")
    return RiskReport.objects.create(
        release=release,
        severity="medium",
        policy_severity="high",
        findings=["1 refund test failed"],
        needs_review=True,
    )


def manager(name: str) -> User:
    user = User.objects.create(username=name)
    user.user_permissions.add(
        *Permission.objects.filter(
            codename__in=["view_release", "view_riskreport", "review_report"]
        )
    )
    return user


@pytest.fixture
def decided_signals() -> Iterator[list[ReviewDecision]]:
    sent: list[ReviewDecision] = []

    def receive(decision: ReviewDecision, **_: Any) -> None:
        sent.append(decision)

    signals.verdict_decided.connect(receive, weak=False)
    yield sent
    signals.verdict_decided.disconnect(receive)


@pytest.mark.django_db
def test_a_second_decision_is_refused_unless_it_supersedes_the_first(
    make_release: Callable[..., Release],
    decided_signals: list[ReviewDecision],
    django_capture_on_commit_callbacks: Any,
) -> None:
    report = waiting_report(make_release)
    ann, bob = manager("ann"), manager("bob")
    with django_capture_on_commit_callbacks(execute=True):
        first = services.decide_report(report, ann, decision="accept", severity="high")
        with pytest.raises(services.AlreadyDecided) as refused:
            services.decide_report(report, bob, decision="override", severity="low", reason="known")
    assert "Already decided by ann at " in str(refused.value)
    assert "(accepted as high)" in str(refused.value)
    assert refused.value.standing.pk == first.pk
    assert ReviewDecision.objects.count() == 1 and decided_signals == [first]

    # On purpose: bob supersedes ann's decision, which stays in the history.
    with django_capture_on_commit_callbacks(execute=True):
        second = services.decide_report(
            report, bob, decision="override", severity="low", reason="known", supersedes=first.pk
        )
    assert second.supersedes_id == first.pk and decided_signals == [first, second]
    # Superseding a decision that no longer stands is refused too.
    with pytest.raises(services.AlreadyDecided, match="Already decided by bob"):
        services.decide_report(report, ann, decision="accept", severity="high", supersedes=first.pk)
    assert ReviewDecision.objects.count() == 2


@pytest.mark.django_db
def test_the_database_refuses_a_second_decision_read_too_early(
    make_release: Callable[..., Release], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two decisions that both read "nothing decided yet": the constraint keeps one."""
    report = waiting_report(make_release)
    first = services.decide_report(report, manager("ann"), decision="accept", severity="high")
    monkeypatch.setattr(services, "standing_decision", _first_none_then(services.standing_decision))
    with pytest.raises(services.AlreadyDecided) as refused:
        services.decide_report(report, manager("bob"), decision="accept", severity="medium")
    assert refused.value.standing.pk == first.pk
    assert list(ReviewDecision.objects.values_list("pk", flat=True)) == [first.pk]


def _first_none_then(
    real: Callable[[RiskReport], ReviewDecision | None],
) -> Callable[[RiskReport], ReviewDecision | None]:
    calls = {"n": 0}

    def read(report: RiskReport) -> ReviewDecision | None:
        calls["n"] += 1
        return None if calls["n"] == 1 else real(report)

    return read


@pytest.mark.django_db
def test_the_page_answers_409_naming_who_decided(make_release: Callable[..., Release]) -> None:
    report = waiting_report(make_release)
    services.decide_report(report, manager("ann"), decision="accept", severity="high")
    client = Client()
    client.force_login(manager("bob"))
    url = reverse("releases:review_decide", args=[report.pk])
    answer = client.post(url, {"accept": "medium"}, headers={"HX-Request": "true"})
    body = answer.content.decode()
    assert answer.status_code == 409
    assert f'id="decision-conflict-{report.pk}"' in body and "Already decided by ann" in body
    assert 'data-review-state="accept"' in body  # the box shows ann's decision
    assert 'name="supersedes"' in body  # and how to supersede it, on purpose
    plain = client.post(url, {"accept": "medium"})
    assert plain.status_code == 409 and "Already decided by ann" in plain.content.decode()
    # On purpose, naming ann's decision: recorded.
    standing = ReviewDecision.objects.get()
    again = client.post(
        url, {"accept": "medium", "supersedes": standing.pk}, headers={"HX-Request": "true"}
    )
    assert again.status_code == 200 and ReviewDecision.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_two_people_deciding_at_the_same_moment_store_one_decision(
    make_release: Callable[..., Release], decided_signals: list[ReviewDecision]
) -> None:
    report = waiting_report(make_release)
    people = [manager("ann"), manager("bob")]
    for round_ in range(5):
        ReviewDecision.objects.all().delete()
        decided_signals.clear()
        start = threading.Barrier(2)
        outcomes: dict[str, object] = {}

        def decide(
            person: User,
            severity: str,
            start: threading.Barrier = start,
            outcomes: dict[str, object] = outcomes,
        ) -> None:
            try:
                start.wait()
                outcomes[person.username] = services.decide_report(
                    report, person, decision="accept", severity=severity
                )
            except Exception as error:  # the outcome is asserted below
                outcomes[person.username] = error
            finally:
                connection.close()

        threads = [
            threading.Thread(target=decide, args=(people[0], "high")),
            threading.Thread(target=decide, args=(people[1], "medium")),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        stored = [o for o in outcomes.values() if isinstance(o, ReviewDecision)]
        refused = [o for o in outcomes.values() if isinstance(o, services.AlreadyDecided)]
        assert (len(stored), len(refused)) == (1, 1), (round_, connection.vendor, outcomes)
        [winner], [loser] = stored, refused
        assert loser.standing.pk == winner.pk
        assert f"Already decided by {winner.reviewer.username} at " in str(loser)  # type: ignore[union-attr]
        assert list(ReviewDecision.objects.values_list("pk", flat=True)) == [winner.pk]
        assert [d.pk for d in decided_signals] == [winner.pk]  # one webhook
