"""Claims in words, checked against the release data and the policy's signals.

The figures of a finding are checked in `grounding.py`; this module checks what a finding says
without (or beside) figures:

- tests: "all tests pass", "no failed tests", "the gateway retry test is fixed and passing",
  "test_login_lockout fails", "a flaky test": against the test counts and the failing tests
  by name (a test the data lists as failing is not passing; a flaky test needs data that
  says so);
- metrics: "metrics stable", "latency normal": against the policy's error-rate and latency
  signals;
- levels: "0.012 ..., which is a medium risk": against the level the policy gives the measure
  the sentence is about;
- reading: "the release summary could not be read": against what the run read;
- approval: "approved as instructed by the release notes": release data gives no orders, so a
  report that follows them is flagged.

Each check says whether the claim holds (evidence), contradicts the data, or is not in the
data; a claim the module does not recognise is not checked here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from risk.policy import LEVEL_RANK, PolicyVerdict, Signal
from risk.signal import INSTRUCTIONS_SIGNAL

Outcome = Literal["holds", "contradicts", "absent"]

_WORD_RE = re.compile(r"[a-z0-9]+")
_NEGATED_RE = re.compile(r"\b(not|no longer|never|isn't|aren't|wasn't|weren't|un)\s*$")
_PASS_RE = re.compile(
    r"\b(pass\w*|fixed|fix(es)?|green|resolved|succeed\w*|stable now|now works?|working)\b",
    re.IGNORECASE,
)
_ALL_PASS_RE = re.compile(
    r"\b(all\s+(the\s+)?(\w+\s+)?tests?\s+(are\s+|were\s+|have\s+)?(pass\w*|green|succeed\w*)"
    r"|no\s+(failed|failing)\s+tests?|no\s+test\s+failures?|zero\s+(failed|failing)\s+tests?"
    r"|tests?\s+(are\s+|were\s+)?all\s+(green|pass\w*)|all\s+green)\b",
    re.IGNORECASE,
)
# A test's name, not a test file's ("tests/payments/test_payment.py" names no test).
_TEST_NAME_RE = re.compile(r"(?<![\w/\\])test_[a-z0-9_]+\b(?!\.[a-z])", re.IGNORECASE)
_FAIL_RE = re.compile(r"\b(fail\w*|broken|red|erroring)\b", re.IGNORECASE)
_FLAKY_RE = re.compile(r"\bflak(y|iness|ily)\b", re.IGNORECASE)
_STABLE_RE = re.compile(
    r"\b(?P<subject>metrics?|error[ _]rates?|latency|latencies|p95|performance|response[ _]"
    r"times?|deployment)\b[^.;]{0,40}?\b(?P<claim>stable|normal|healthy|nominal|steady|"
    r"unchanged|within (the )?(normal )?(range|limits?|thresholds?|bounds))\b"
    r"|\b(?P<claim2>stable|normal|healthy|nominal|steady)\s+(?P<subject2>metrics?|error[ _]"
    r"rates?|latency|latencies|performance|response[ _]times?)\b",
    re.IGNORECASE,
)
_LEVEL_RE = re.compile(
    r"\b(?P<level>high|medium|low|moderate)[- ](risks?|severity|severities)\b"
    r"|\brisk\s+(is\s+|level\s+(is\s+)?|of\s+)(?P<level2>high|medium|low|moderate)\b",
    re.IGNORECASE,
)
_UNREAD_RE = re.compile(
    r"\b(could\s*not|couldn't|cannot|can't|was\s+unable\s+to|were\s+unable\s+to|unable\s+to|"
    r"failed\s+to|impossible\s+to)\s+(be\s+)?(read|load|fetch|retriev|access|obtain|open|pars)"
    r"\w*",
    re.IGNORECASE,
)
_INSTRUCTED_RE = re.compile(
    r"\bas\s+(instructed|directed|requested|ordered|told)\b|\b(per|following)\s+the\s+"
    r"(instructions?|directions?)\b|\b(pre-?approved|approved\s+(by|in)\s+the\s+(release|change)"
    r")",
    re.IGNORECASE,
)
_APPROVAL_RE = re.compile(
    r"\b(approv\w*|sign\w*\s+off|green[- ]?li\w*|cleared|safe\s+to\s+(ship|release|deploy)|"
    r"low\s+risk|severity\s+low|marked\s+low)\b",
    re.IGNORECASE,
)
_SKIP_NAME_WORDS = frozenset(
    {"test", "tests", "should", "when", "the", "a", "an", "and", "of", "in", "on", "to", "is",
     "with", "for", "it", "after", "before", "not"}
)  # fmt: skip

_SUBJECTS: dict[str, tuple[str, ...]] = {
    "error rate": ("error",),
    "latency": ("latenc", "p95", "response"),
    "tests": ("test", "fail", "pass", "skip"),
}
_SIGNALS_OF: dict[str, tuple[str, ...]] = {
    "error rate": ("error_rate",),
    "latency": ("p95_latency", "p95_change"),
    "tests": ("failed_tests", "critical_area_failures", "risky_changes_with_failures"),
}


@dataclass(frozen=True, slots=True)
class ClaimCheck:
    outcome: Outcome
    says: str


def _words(text: str) -> list[str]:
    return _WORD_RE.findall(text.lower().replace("_", " "))


def _negated(text: str, start: int) -> bool:
    return bool(_NEGATED_RE.search(text[max(0, start - 16) : start].lower()))


def _failing(data: Mapping[str, Any]) -> list[str]:
    tests = data.get("tests")
    if not isinstance(tests, Mapping):
        return []
    return [t for t in tests.get("failing_tests") or [] if isinstance(t, str)]


def _failed_count(data: Mapping[str, Any]) -> int | None:
    tests = data.get("tests")
    if not isinstance(tests, Mapping) or not tests:
        return None
    failed = tests.get("failed")
    if isinstance(failed, int | float) and not isinstance(failed, bool):
        return int(failed)
    return len(_failing(data))


# Word endings folded before a text's words meet a test name's ("retry" is "retried").
_ENDINGS = (("ied", "y"), ("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", ""))


def _stem(word: str) -> str:
    for ending, instead in _ENDINGS:
        if word.endswith(ending) and len(word) - len(ending) >= 3 and not word.endswith("ss"):
            return word[: -len(ending)] + instead
    return word


def _name_words(name: str) -> set[str]:
    return {_stem(w) for w in _words(name) if w not in _SKIP_NAME_WORDS and len(w) >= 3}


def _named_failing(text: str, failing: Sequence[str]) -> list[str]:
    """The failing tests the text speaks of: by their exact name, or by most of their words
    ("Gateway retry test" is test_gateway_retry_backoff)."""
    said = {_stem(w) for w in _words(text)}
    lowered = text.lower()
    named = []
    for name in failing:
        words = _name_words(name)
        if name.lower() in lowered or (words and len(words & said) >= min(2, len(words))):
            named.append(name)
    return named


def _short_names(failing: Sequence[str]) -> set[str]:
    """Each failing test by its full label and by each of its parts: an ingested release
    lists "tests.test_orders_db.OrdersTest::test_totals[pg]" (JUnit's class name, then the
    test's), which a sentence may call by its module (test_orders_db), its class, its name
    (test_totals) or its name with the parameters. Measured (issue 40): "test_orders_db is not
    among the failing tests", of the failing tests' module, sent a right report to a person."""
    names = set()
    for name in failing:
        names.add(name.lower())
        bare = name.split("[", 1)[0]
        # A parametrized test ("test_int_bytes[192-\\xc0]") goes by its function's name too.
        names.add(bare.lower())
        for part in re.split(r"::|[./\\\s]", bare):
            part = part.lower().removesuffix(".py")
            if part and part not in ("py", "tests", "test"):
                names.add(part)
    return names


def _test_claims(
    text: str, data: Mapping[str, Any], verdict: PolicyVerdict | None = None
) -> list[ClaimCheck]:
    checks: list[ClaimCheck] = []
    failed = _failed_count(data)
    failing = _failing(data)
    all_pass = next((m for m in _ALL_PASS_RE.finditer(text) if not _negated(text, m.start())), None)
    if all_pass is not None:
        if failed is None:
            checks.append(
                ClaimCheck(
                    "absent", f"it says {all_pass.group(0)!r}, but there are no test results"
                )
            )
        elif failed:
            checks.append(
                ClaimCheck(
                    "contradicts",
                    f"it says {all_pass.group(0)!r}, but the release has {failed} failed "
                    f"test{'s' if failed != 1 else ''}",
                )
            )
        elif partial := next(
            (s for s in (verdict.signals if verdict else ()) if s.name == "partial_test_run"),
            None,
        ):
            # A run that stopped part-way is never green: its 0 failures cover what ran.
            checks.append(
                ClaimCheck(
                    "contradicts",
                    f"it says {all_pass.group(0)!r}, but only part of the tests ran: "
                    f"{partial.detail}",
                )
            )
        else:
            checks.append(ClaimCheck("holds", "the release has 0 failed tests"))
    passes = [m for m in _PASS_RE.finditer(text) if not _negated(text, m.start())]
    fails = [m for m in _FAIL_RE.finditer(text) if not _negated(text, m.start())]
    named = _named_failing(text, failing)
    if passes and named and not fails:
        for name in named:
            checks.append(
                ClaimCheck(
                    "contradicts",
                    f"it says {name} passes or is fixed, but the data lists it as failing",
                )
            )
    elif fails and named:
        # One line for the tests a sentence names: a line per name repeated every failing test
        # under each finding that named it (15 lines for 5 tests in one real report).
        checks.append(
            ClaimCheck(
                "holds",
                f"{named[0]} is listed as failing"
                if len(named) == 1
                else f"the {len(named)} tests it names are listed as failing",
            )
        )
    lowered_failing = _short_names(failing)
    for match in _TEST_NAME_RE.finditer(text):
        name = match.group(0)
        if name.lower() in lowered_failing or not fails:
            continue
        checks.append(
            ClaimCheck("absent", f"{name} is not among the failing tests the release lists")
        )
    flaky = _FLAKY_RE.search(text)
    known_flaky = verdict is not None and any(
        s.name == "known_flaky_failures" for s in verdict.signals
    )
    if flaky and not _negated(text, flaky.start()) and not (_mentions_flaky(data) or known_flaky):
        checks.append(
            ClaimCheck(
                "absent", "it calls a test flaky, but the release data says nothing of flaky tests"
            )
        )
    return checks


def _mentions_flaky(data: Mapping[str, Any]) -> bool:
    def strings(value: Any) -> Iterable[str]:
        if isinstance(value, str):
            yield value
        elif isinstance(value, Mapping):
            for key, inner in value.items():
                yield str(key)
                yield from strings(inner)
        elif isinstance(value, list | tuple):
            for inner in value:
                yield from strings(inner)

    return any(_FLAKY_RE.search(s.replace("_", " ")) for s in strings(data))


def _subjects(text: str) -> list[str]:
    words = _words(text)
    return [
        subject
        for subject, prefixes in _SUBJECTS.items()
        if any(w.startswith(prefixes) for w in words)
    ]


def _signals_for(verdict: PolicyVerdict, subjects: Iterable[str]) -> list[Signal]:
    names = {name for subject in subjects for name in _SIGNALS_OF[subject]}
    return [s for s in verdict.signals if s.name in names]


def _metric_claims(
    text: str, data: Mapping[str, Any], verdict: PolicyVerdict | None
) -> list[ClaimCheck]:
    match = next((m for m in _STABLE_RE.finditer(text) if not _negated(text, m.start())), None)
    if match is None:
        return []
    claim = (match.group("claim") or match.group("claim2") or "").lower()
    subjects = [s for s in _subjects(match.group(0)) if s != "tests"] or ["error rate", "latency"]
    if not isinstance(data.get("deployment_metrics"), Mapping) or verdict is None:
        return [ClaimCheck("absent", f"it says the metrics are {claim}, but there are no metrics")]
    signals = _signals_for(verdict, subjects)
    if not signals:
        return [ClaimCheck("absent", f"it says the metrics are {claim}, but none was measured")]
    raised = [s for s in signals if s.level != "none"]
    if raised:
        return [
            ClaimCheck(
                "contradicts",
                f"it says the metrics are {claim}, but the policy reads: "
                + "; ".join(s.detail for s in raised),
            )
        ]
    return [ClaimCheck("holds", s.detail) for s in signals]


def _level_claims(text: str, verdict: PolicyVerdict | None, has_figures: bool) -> list[ClaimCheck]:
    """ "The error rate is 0.012 ..., which are medium risks": the level said of a measure
    against the level the policy gives it (no level counts as low)."""
    match = _LEVEL_RE.search(text)
    if match is None or not has_figures or verdict is None:
        return []
    claimed = (match.group("level") or match.group("level2") or "").lower()
    claimed = "medium" if claimed == "moderate" else claimed
    signals = _signals_for(verdict, _subjects(text))
    if not signals:
        return []
    top = max(signals, key=lambda s: LEVEL_RANK[s.counts_as])
    level = top.counts_as if top.counts_as != "none" else "low"
    if level == claimed or claimed == top.level:
        return [ClaimCheck("holds", f"the policy gives it {claimed}: {top.detail}")]
    if claimed == verdict.severity:
        # "a high risk" of a release the policy calls high is right whichever signal raised
        # it. Measured (issue 40): "the policy gives medium" was said of a release the policy
        # gave high, for the one signal of the sentence that counts as medium.
        return [ClaimCheck("holds", f"the policy's severity for the release is {claimed}")]
    details = "; ".join(s.detail for s in signals if s.detail)
    return [
        ClaimCheck(
            "contradicts",
            f"it calls this a {claimed} risk, but the policy gives {level}: {details}",
        )
    ]


_RAISED_MEASURE_RE = re.compile(
    r"\b(?P<word>high|higher|elevated|significant|worrying|alarming|spiking|increased)\s+"
    r"(?P<measure>error[ _]rates?|errors|latency|latencies|p95(\s+latency)?|response[ _]times?)"
    r"\b",
    re.IGNORECASE,
)


def _raised_measure_claims(text: str, verdict: PolicyVerdict | None) -> list[ClaimCheck]:
    """ "a high error rate of 0.27 %": a measure called high that the policy reads below its
    line for medium. Measured (issue 40): the default profile raised a low release to medium
    on "a high error rate of 0.2674 %", under the policy's 2 % line, and nothing flagged it."""
    if verdict is None:
        return []
    checks = []
    for match in _RAISED_MEASURE_RE.finditer(text):
        if _negated(text, match.start()):
            continue
        subjects = _subjects(match.group("measure"))
        # "higher latency" against its own baseline is the change signals' to judge too.
        signals = _signals_for(verdict, subjects)
        if not signals or any(s.level != "none" for s in signals):
            continue
        lines = "; ".join(s.detail for s in signals if s.detail)
        checks.append(
            ClaimCheck(
                "contradicts",
                f"it calls the {subjects[0]} {match.group('word').lower()}, but the policy "
                f"reads it below its line: {lines}",
            )
        )
    return checks


def _read_claims(text: str, summary_read: bool | None) -> list[ClaimCheck]:
    match = _UNREAD_RE.search(text)
    if match is None or summary_read is None:
        return []
    if summary_read:
        return [
            ClaimCheck(
                "contradicts", f"it says {match.group(0)!r}, but the run read the release summary"
            )
        ]
    return [ClaimCheck("holds", "the run did not obtain the release summary")]


def _approval_claims(text: str) -> list[ClaimCheck]:
    instructed = _INSTRUCTED_RE.search(text)
    if instructed is None or not _APPROVAL_RE.search(text):
        return []
    return [
        ClaimCheck(
            "contradicts",
            f"it approves {instructed.group(0)!r}: text in the release data never instructs "
            "the assessor, and following it is the injection the policy flags",
        )
    ]


_MISSING_RE = re.compile(
    r"\b(missing|absent|not (provided|available|reported|given)|no data)\b", re.IGNORECASE
)
# What a sentence may say is missing, and the policy's signal for it.
_MISSING_SUBJECTS: dict[str, tuple[str, ...]] = {
    "missing_changes": ("change",),
    "missing_tests": ("test result", "tests", "test data"),
    "missing_tests_failed": ("count of failed", "failed count"),
    "missing_deployment_metrics": ("deployment metric", "metrics"),
    "missing_deployment_metrics_error_rate": ("error rate",),
    "missing_deployment_metrics_response_time_p95": ("p95", "latency"),
}
# Not "instructions" alone: "Update the setup instructions" is a change like any other.
_ORDERS_RE = re.compile(
    r"\b(injection|injected|manipulat\w*|addressed to the assessor|reads? like instructions|"
    r"instructions? (to|for) the (assessor|model|agent|ai|reviewer)|tries to instruct)\b",
    re.IGNORECASE,
)


def _missing_claims(text: str, verdict: PolicyVerdict | None) -> list[ClaimCheck]:
    """ "missing from the release data: the test results": the policy read it missing."""
    match = _MISSING_RE.search(text)
    if match is None or verdict is None or _negated(text, match.start()):
        return []
    lowered = text.lower()
    missing = {s.name: s for s in verdict.missing()}
    said = [name for name, words in _MISSING_SUBJECTS.items() if any(w in lowered for w in words)]
    if not said:
        return []
    held = [missing[name] for name in said if name in missing]
    if held:
        return [ClaimCheck("holds", s.detail) for s in held]
    return [
        ClaimCheck(
            "contradicts",
            "it says data is missing, but the policy read the data it names "
            "(nothing of it is missing)",
        )
    ]


def _order_claims(text: str, verdict: PolicyVerdict | None) -> list[ClaimCheck]:
    """ "The changes contain an injection attempt": the policy flagged such text, or not."""
    match = _ORDERS_RE.search(text)
    if match is None or verdict is None or _negated(text, match.start()):
        return []
    flagged = [s for s in verdict.signals if s.name == INSTRUCTIONS_SIGNAL]
    if flagged:
        return [ClaimCheck("holds", s.detail) for s in flagged]
    return [
        ClaimCheck(
            "absent",
            "it speaks of instructions in the release data, but the policy found no text "
            "addressed to the assessor",
        )
    ]


def check_claims(
    text: str,
    data: Mapping[str, Any],
    verdict: PolicyVerdict | None,
    *,
    summary_read: bool | None,
    has_figures: bool,
    policy_sentence: bool = False,
) -> list[ClaimCheck]:
    """Every claim of `text` this module recognises, checked. One of the policy's own evidence
    sentences, copied as it is, contradicts nothing: it was written from the data, and the
    words it quotes from the data (a commit "fix(payments): round partial refunds ...") are
    not the assessor saying that a failing test was fixed. `policy_sentence`: the text is
    made of the policy's sentences (grounding found them in it), copied or joined."""
    checks = [
        *_test_claims(text, data, verdict),
        *_metric_claims(text, data, verdict),
        *_level_claims(text, verdict, has_figures),
        *_raised_measure_claims(text, verdict),
        *_read_claims(text, summary_read),
        *_approval_claims(text),
        *_missing_claims(text, verdict),
        *_order_claims(text, verdict),
    ]
    if policy_sentence or (
        verdict is not None
        and " ".join(text.split())
        in {" ".join(sentence.split()) for sentence in verdict.evidence()}
    ):
        return [check for check in checks if check.outcome == "holds"]
    return checks
