"""A verdict (the JSON of `GET /api/releases/<version>/verdict`) as the Markdown summary a CI
job shows (GitHub's job summary, GitLab's, a pull-request comment), read in ten seconds (issue
37, item 9); `manage.py verdict --markdown` writes the same:

- a headline: the severity and what the gate did with it, why in one sentence (the server's
  `why`), what to do;
- at most five findings: one line per failing test with its first suspect commit, then the
  findings that name no test already named, each cut to its first sentence (a new error
  group's, with its exception, route, counts and first suspect, kept whole up to 60 words);
  how many more the release page has;
- links to the release page and, once a person is asked, to the report's review item.

The grounding of each finding ("5 = the policy's failed tests (its own sentence)") is the
release page's, never the summary's. Release data and a model's words stay text (no links,
images, HTML, headings or tables of their own): Markdown's specials are escaped, except inside
a code span, which renders as code and holds none of those.
"""

from __future__ import annotations

import re
from typing import Any

from detective_client.verdict import (
    AT_OR_ABOVE,
    BELOW,
    NO_VERDICT,
    POLICY_LABEL,
    WAITS_FOR_PERSON,
    by_policy,
    outcome,
)

MOST_FINDINGS = 5
MOST_WORDS = 30
# A finding that names its first suspect commit (a new error group in production, issue 36)
# says the commit's subject near its end: cut at 30 words, a subject of ten words was lost.
MOST_WORDS_WITH_SUSPECT = 60
ICONS = {BELOW: "✅", AT_OR_ABOVE: "⛔", WAITS_FOR_PERSON: "⏸️", NO_VERDICT: "❔"}

# Without "[" a parenthesis opens no link, so parentheses stay as they are.
_SPECIAL = re.compile(r"([\\`*_\[\]<>#|!~&])")
# A code span as CommonMark reads it: a run of backticks, then anything up to the same run.
_CODE_SPAN = re.compile(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`])")
# The policy's sentence on one failure's first suspect (risk/suspect_signals.py).
_SUSPECT = re.compile(
    r"^(?P<test>\S+) fails; first suspect: (?P<sha>[0-9a-f]{7,40}) '(?P<subject>.*?)' "
    r"changed (?P<path>[^,;]+?)(?:,|;|$)"
)
# A JUnit test id as the findings write it ("tests.test_tax::test_tax_is_kept").
_TEST_ID = re.compile(r"[\w.\[\]/-]+::([\w\[\]-]+)")


def _escape(text: str) -> str:
    return _SPECIAL.sub(r"\\\1", text)


def text(value: object) -> str:
    """One line of release data or a model's words, kept text; its code spans render."""
    flat = " ".join(str(value).split())
    parts, at = [], 0
    for span in _CODE_SPAN.finditer(flat):
        parts.append(_escape(flat[at : span.start()]))
        parts.append(span.group(0))
        at = span.end()
    parts.append(_escape(flat[at:]))
    return "".join(parts)


def code(value: object) -> str:
    """A name as a code span (a backtick inside would end it early, so none is kept)."""
    return f"`{' '.join(str(value).replace('`', '').split())}`"


def first_sentence(value: object, most_words: int = MOST_WORDS) -> str:
    sentence = _SENTENCE_END.split(" ".join(str(value).split()), maxsplit=1)[0]
    words = sentence.split()
    return sentence if len(words) <= most_words else " ".join(words[:most_words]) + " …"


def _short_test(name: str) -> str:
    return name.rsplit("::", 1)[-1]


def _names_a_test(line: str, named: set[str]) -> bool:
    mentioned = {_short_test(match) for match in _TEST_ID.findall(line)}
    words = set(re.findall(r"[\w\[\]-]+", line))
    return bool(mentioned & named or words & named)


def _suspect_lines(suspects: list[str]) -> tuple[list[str], set[str]]:
    """One line per failing test with its first suspect, and the tests they name."""
    lines, named = [], set()
    for sentence in suspects:
        found = _SUSPECT.match(" ".join(sentence.split()))
        if found is None:
            if not sentence.startswith("and "):
                lines.append(text(first_sentence(sentence)))
            continue
        test = _short_test(found["test"])
        named.add(test)
        lines.append(
            f"{code(test)}: {code(found['sha'][:9])} {text(found['subject'])} "
            f"({code(found['path'].strip())})"
        )
    return lines, named


def findings(verdict: dict[str, Any]) -> tuple[list[str], int]:
    """The findings to show, at most five, and how many were left for the release page. The
    failing tests with their first suspects are the first finding, one line a test; a finding
    that names a test already named is left out (its test is said once)."""
    suspects = [str(s) for s in verdict.get("suspects") or [] if s]
    suspect_lines, named = _suspect_lines(suspects)
    shown: list[str] = []
    if suspect_lines:
        more = len(suspect_lines) - MOST_FINDINGS
        listed = [f"   - {line}" for line in suspect_lines[:MOST_FINDINGS]]
        if more > 0:
            listed.append(f"   - and {more} more on the release page")
        shown.append("\n".join(["New failures and their first suspect commits:", *listed]))
    said: set[str] = set()
    mark = not by_policy(verdict)
    for finding in verdict.get("findings") or []:
        body = " ".join(str(finding.get("text", "")).split())
        sentence = first_sentence(
            body, MOST_WORDS_WITH_SUSPECT if " first suspect " in body else MOST_WORDS
        )
        if not body or " first suspect: " in body or sentence.casefold() in said:
            continue
        if _names_a_test(body, named):
            continue
        said.add(sentence.casefold())
        named |= {_short_test(match) for match in _TEST_ID.findall(body)}
        ours = " *(the policy's)*" if mark and finding.get("from_policy") else ""
        shown.append(f"{text(sentence)}{ours}")
    return shown[:MOST_FINDINGS], max(0, len(shown) - MOST_FINDINGS)


def _what_to_do(verdict: dict[str, Any], code_: int, fail_on: str) -> str:
    review, page = verdict.get("review_url"), verdict.get("url")
    if code_ == WAITS_FOR_PERSON:
        where = f"the [review page]({review})" if review else "the review page"
        return (
            f"decide on {where}; `detective verdict --wait-for-decision SECONDS` "
            "waits for the decision."
        )
    if code_ == NO_VERDICT:
        return text(verdict.get("next_step") or "re-run this job; if it fails again, see its log.")
    if code_ == AT_OR_ABOVE:
        where = f"the [release page]({page})" if page else "the release page"
        return (
            f"fix what the findings name and re-run, or have a release manager decide on {where}."
        )
    if verdict.get("severity") in ("medium", "high"):
        return (
            f"the gate lets it through (below {text(fail_on)}); read the findings before it ships."
        )
    return "nothing: the release passes the gate."


def _why(verdict: dict[str, Any]) -> str:
    if verdict.get("why"):
        return str(verdict["why"])
    if verdict.get("problem"):
        return str(verdict["problem"])
    if verdict.get("state") == "needs_person" and verdict.get("review_reasons"):
        reason = str(verdict["review_reasons"][0]).split(": ", 1)[0]
        return f"A person must decide: {reason}"
    for finding in verdict.get("findings") or []:
        if finding.get("text"):
            return str(finding["text"])
    return ""


def markdown(verdict: dict[str, Any], service: str, code_: int, fail_on: str) -> str:
    """The summary of `verdict`, whose exit code `code_` the caller worked out."""
    severity = verdict.get("severity")
    risk = f"{severity.capitalize()} risk" if severity else "No verdict"
    whose = f", {POLICY_LABEL}" if by_policy(verdict) else ""
    # "Detective" names whose summary it is among a job's others.
    title = f"{ICONS[code_]} Detective: {service} {verdict.get('version')}: {risk}{whose}"
    lines = [f"### {text(title)} · {text(outcome(code_, fail_on))} (exit {code_})", ""]
    why = _why(verdict)
    if why:
        lines += [f"**Why:** {text(first_sentence(why, 40))}", ""]
    if verdict.get("state") == "failed" and verdict.get("run_error"):
        lines += [f"**The model's run failed:** {text(first_sentence(verdict['run_error']))}", ""]
    if verdict.get("tests"):
        # Tests and subtests apart, and how much of the usual suite ran when not all of it.
        lines += [f"**Tests:** {text(verdict['tests'])}", ""]
    lines += [f"**What to do:** {_what_to_do(verdict, code_, fail_on)}", ""]
    shown, left = findings(verdict)
    if shown:
        lines += [f"{n}. {line}" for n, line in enumerate(shown, 1)]
        if left:
            lines.append(f"\n{left} more on the release page.")
        lines.append("")
    links = []
    if verdict.get("url"):
        links.append(f"[Release page]({verdict['url']})")
    if verdict.get("review_url") and verdict.get("state") in ("needs_person", "decided"):
        links.append(f"[Review item]({verdict['review_url']})")
    if links:
        lines.append(" · ".join(links))
    return "\n".join(lines).rstrip() + "\n"
