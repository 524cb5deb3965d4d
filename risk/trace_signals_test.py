from __future__ import annotations

from risk.settings import PolicySettings
from risk.suspects import Suspect
from risk.trace_signals import (
    ErrorGroupFacts,
    TraceFacts,
    new_error_groups,
    regressed_error_groups,
)


def group(**changed: object) -> ErrorGroupFacts:
    fields: dict[str, object] = {
        "fingerprint": "f1",
        "exception_type": "ZeroDivisionError",
        "path": "shop/pricing.py",
        "function": "line_total",
        "count": 100,
        "baseline_count": 0,
        "seen_before": False,
        "route": "GET /cart/{cart_id}/total",
        "route_requests": 600,
    }
    fields.update(changed)
    return ErrorGroupFacts(**fields)  # type: ignore[arg-type]


def test_a_new_group_past_the_share_is_high_and_its_sentence_carries_the_figures() -> None:
    [signal] = new_error_groups(TraceFacts("1.1.0", (group(),)), PolicySettings())
    assert signal.level == "high" and signal.counts_as == "high"
    assert signal.detail == (
        "ZeroDivisionError in shop/pricing.py `line_total`: 100 of 600 requests of "
        "GET /cart/{cart_id}/total since 1.1.0 (none before); new in this release"
    )


def test_a_rare_new_group_is_medium() -> None:
    [signal] = new_error_groups(TraceFacts("1.1.0", (group(count=3),)), PolicySettings())
    assert signal.level == "medium"


def test_a_group_seen_before_or_in_the_baseline_is_not_new() -> None:
    known = (group(seen_before=True), group(fingerprint="f2", baseline_count=4))
    assert new_error_groups(TraceFacts("1.1.0", known), PolicySettings()) == []
    assert new_error_groups(None, PolicySettings()) == []


def test_the_first_suspect_is_named() -> None:
    suspect = Suspect("a1b2c3d4e5", "Round prices per line", "Ana Lima", "on the path",
                      "shop/pricing.py", 12, 0, "its change is on that line")  # fmt: skip
    [signal] = new_error_groups(TraceFacts("1.1.0", (group(suspect=suspect),)), PolicySettings())
    assert signal.detail.endswith(
        "; first suspect a1b2c3d 'Round prices per line' (Ana Lima), whose change is on that line"
    )


def test_the_level_and_the_share_are_settings() -> None:
    cfg = PolicySettings(new_error_group_high_share_at_or_above=None, new_error_group_level="low")
    [signal] = new_error_groups(TraceFacts("1.1.0", (group(),)), cfg)
    assert signal.level == "low"


def test_a_group_back_after_a_release_without_it_is_regressed() -> None:
    back = group(seen_before=True, seen_in_previous=False, count=4)
    [signal] = regressed_error_groups(TraceFacts("1.2.0", (back,)), PolicySettings())
    assert (signal.name, signal.level) == ("regressed_error_groups", "medium")
    assert signal.detail == (
        "ZeroDivisionError in shop/pricing.py `line_total`: 4 times of GET /cart/{cart_id}/total "
        "since 1.2.0; seen in an earlier release, not in the previous one: regressed"
    )
    ongoing = group(seen_before=True, seen_in_previous=True)
    assert regressed_error_groups(TraceFacts("1.2.0", (ongoing,)), PolicySettings()) == []
    assert new_error_groups(TraceFacts("1.2.0", (back,)), PolicySettings()) == []


CHARGE = ("/srv/app/shop/cart.py", "payments/charge.py")


def test_a_rare_new_group_whose_frames_run_through_a_critical_area_is_high() -> None:
    rare = group(count=3, path="payments/charge.py", function="capture", frame_paths=CHARGE)
    [signal] = new_error_groups(TraceFacts("1.1.0", (rare,)), PolicySettings())
    assert (signal.level, signal.counts_as, signal.areas) == ("high", "high", ("payments",))
    assert signal.detail == (
        "ZeroDivisionError in payments/charge.py `capture`: 3 of 600 requests of "
        "GET /cart/{cart_id}/total since 1.1.0 (none before); new in this release; its frames "
        "run through payments/charge.py: payments, a critical area"
    )
    assert "high when its frames run through a critical area" in signal.threshold


def test_the_critical_area_is_the_changed_files_definition() -> None:
    # A deployed path is matched by the same globs (`*/payments/*`); a service's own
    # `critical_paths` count; a test file or a word in a path ("pay.py") does not.
    deployed = group(count=3, frame_paths=("/srv/app/payments/charge.py",))
    own = group(count=3, frame_paths=("shop/pricing.py",))
    not_code = group(count=3, frame_paths=("payments/charge_test.py", "shop/pay.py"))
    cfg = PolicySettings(critical_paths={"pricing": ["shop/pricing.py"]})
    said = {
        name: new_error_groups(TraceFacts("1.1.0", (g,)), cfg)[0].level
        for name, g in (("deployed", deployed), ("own", own), ("not_code", not_code))
    }
    assert said == {"deployed": "high", "own": "high", "not_code": "medium"}
    assert new_error_groups(TraceFacts("1.1.0", (own,)), PolicySettings())[0].level == "medium"


def test_the_group_in_a_critical_area_is_said_first_and_its_level_is_a_setting() -> None:
    busy = group(count=20, fingerprint="busy")
    charge = group(count=2, fingerprint="charge", exception_type="KeyError", frame_paths=CHARGE)
    facts = TraceFacts("1.1.0", (busy, charge))
    [signal] = new_error_groups(facts, PolicySettings())
    assert signal.detail.startswith("KeyError") and signal.level == "high"
    cfg = PolicySettings(new_error_group_in_critical_area_level="medium")
    assert new_error_groups(facts, cfg)[0].level == "medium"
    # A regressed group in a critical area stays medium: it shipped before.
    back = group(seen_before=True, frame_paths=CHARGE)
    [regressed] = regressed_error_groups(TraceFacts("1.2.0", (back,)), PolicySettings())
    assert regressed.level == "medium"
