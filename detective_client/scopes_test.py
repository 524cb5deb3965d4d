"""Functions of JavaScript, TypeScript and Java read with tree-sitter's grammars."""

from __future__ import annotations

from detective_client.scopes import scopes_of


def _named(path: str, source: str) -> dict[str, tuple[int, int, set[str]]]:
    reader = scopes_of(path)
    assert reader is not None
    return {words[0][4:]: (start, end, set(words[1:])) for start, end, words in reader(source)}


def test_javascript_functions_methods_and_assigned_functions() -> None:
    source = (
        "class Command {\n"  # 1
        "  option(flags) {\n"
        "    return this._optionEx({}, flags);\n"
        "  }\n"
        "}\n"  # 5
        "exports.parse = function (str) {\n"
        "  return str.split(',').map((part) => part.trim());\n"
        "};\n"
        "const humanize = (ms) => `${ms}ms`;\n"
        "function* ids() { yield 1; }\n"  # 10
        "module.exports = { fmt: function (v) { return v; } };\n"
    )
    found = _named("lib/command.js", source)
    assert set(found) == {"option", "parse", "humanize", "ids", "fmt"}
    assert found["option"][:2] == (2, 4) and {"Command", "_optionEx", "flags"} <= found["option"][2]
    # The callback inside parse is parse's, not a scope of its own.
    assert found["parse"][:2] == (6, 8) and "trim" in found["parse"][2]


def test_typescript_and_tsx() -> None:
    source = (
        "export class Parser<T> {\n"
        "  private depth = 0;\n"
        "  parse(input: string): T {\n"
        "    return JSON.parse(input) as T;\n"
        "  }\n"
        "  reset = (): void => { this.depth = 0; };\n"
        "}\n"
        "export function tokenize(s: string): string[] { return s.split(' '); }\n"
    )
    found = _named("src/parser.ts", source)
    assert set(found) == {"parse", "reset", "tokenize"}
    assert found["parse"][:2] == (3, 5) and "Parser" in found["parse"][2]
    tsx = _named("web/Cart.tsx", "export function Cart() {\n  return <div>{total()}</div>;\n}\n")
    assert tsx["Cart"][:2] == (1, 3) and "total" in tsx["Cart"][2]


def test_java_methods_and_constructors() -> None:
    source = (
        "package org.x;\n"
        "public class Money {\n"
        "  private final long cents;\n"
        "  public Money(long cents) { this.cents = cents; }\n"
        "  public Money plus(Money other) {\n"
        "    return new Money(cents + other.cents);\n"
        "  }\n"
        "}\n"
    )
    found = _named("src/main/java/org/x/Money.java", source)
    assert found["Money"][:2] == (4, 4)
    assert found["plus"][:2] == (5, 7) and "Money" in found["plus"][2]


def test_other_languages_and_broken_source() -> None:
    assert scopes_of("README.md") is None
    reader = scopes_of("x.js")
    assert reader is not None and reader("function (") == []
