"""What ties a change to a failing test through functions: calls across modules, the chain's
commonest link, the same chain for the same inputs."""

from __future__ import annotations

from risk.scope_evidence import call_reach, chain_rarity, link_counts, modules_named
from risk.suspects import ChangedRange, python_scopes

_VERSION = (
    "def bump_minor(v):\n    return v + 1\n\n\n"
    "def bump_build(v):\n    return _increment(v)\n\n\n"
    "def _increment(v):\n    return match(v)\n\n\n"
    "def match(v):\n    return _cmp(v)\n\n\n"
    "def _cmp(v):\n    return v\n"
)
_CLI = "def cmd_bump(args):\n    table = {'minor': 'bump_minor'}\n    return table[args]\n"
# Functions whose text says `match` (a regular expression's), not calls of the method.
_OTHER = "".join(f"def f{n}(v):\n    return re.match(v)\n\n\n" for n in range(1))


def test_a_call_crosses_modules() -> None:
    scopes = {"pkg/version.py": python_scopes(_VERSION), "pkg/cli.py": python_scopes(_CLI)}
    owned = {"pkg/version.py": [ChangedRange("pkg/version.py", 2, 2, "c1")]}
    found = dict(modules_named(scopes, scopes, owned, frozenset({"cmd_bump"})))
    tie = found[("pkg/version.py", owned["pkg/version.py"][0])]
    assert (tie.name, tie.scope, tie.called) == ("cmd_bump", "bump_minor", True)


def test_a_chain_is_as_telling_as_its_commonest_link() -> None:
    scopes = python_scopes(_VERSION + "\n\n" + _OTHER)
    names = frozenset({"bump_build", "bump_minor"})
    counts = link_counts(scopes, names)
    reach = call_reach(scopes, names, counts)
    by_name = {scopes[i].name: chain for i, chain in reach.items()}
    assert by_name["_cmp"] == ("bump_build", "_increment", "match", "_cmp")
    # `match` is named by 2 other functions: `_cmp` reached through it ties weakly.
    assert chain_rarity(by_name["_cmp"], counts) == 2
    assert chain_rarity(by_name["bump_minor"], counts) == 1


def test_the_same_inputs_give_the_same_chain() -> None:
    # Two roots reach `shared`; the rarer root's chain is kept whatever the set's order.
    source = (
        "def common(v):\n    return shared(v)\n\n\n"
        "def rare(v):\n    return shared(v)\n\n\n"
        "def shared(v):\n    return v\n\n\n"
        + "".join(f"def {n}(v):\n    return common(v)\n\n\n" for n in "abcd")
    )
    scopes = python_scopes(source)
    chains = {
        tuple(sorted(call_reach(scopes, frozenset(order)).items())) for order in
        (["common", "rare"], ["rare", "common"])
    }  # fmt: skip
    assert len(chains) == 1
    shared = next(i for i, s in enumerate(scopes) if s.name == "shared")
    assert call_reach(scopes, frozenset({"common", "rare"}))[shared] == ("rare", "shared")
