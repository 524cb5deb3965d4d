from __future__ import annotations

import re

import pytest

from agent.errors import ConfigurationError
from agent.prompts import (
    DEFAULT_PROFILE,
    DEFAULT_SYSTEM_PROMPT,
    PROFILES,
    SMALL_MODEL_PROFILE,
    SMALL_MODEL_SYSTEM_PROMPT,
    PromptProfile,
    is_small_model,
    profile_for,
)


@pytest.mark.parametrize("prompt", [DEFAULT_SYSTEM_PROMPT, SMALL_MODEL_SYSTEM_PROMPT])
def test_prompts_carry_the_essential_instructions(prompt: str) -> None:
    lowered = prompt.lower()
    assert "get_release_summary" in prompt
    assert "file_risk_report" in prompt
    assert lowered.index("get_release_summary") < lowered.index("file_risk_report")
    assert "policy" in lowered
    assert "instructions" in lowered  # data is not instructions
    assert "refused" in lowered  # a refused report is corrected and filed again
    assert re.search(r"(fails|returns an error).*do not", lowered)  # no report then


@pytest.mark.parametrize("prompt", [DEFAULT_SYSTEM_PROMPT, SMALL_MODEL_SYSTEM_PROMPT])
def test_prompts_give_no_example_findings(prompt: str) -> None:
    # Measured: a 1.5B model copied "2 payment tests failing" into 17 of 30 reports.
    assert not re.search(r"\d+ (?:\w+ )?(?:failed |failing )?tests?\b", prompt)
    assert "for example" not in prompt.lower()


def test_the_small_prompt_has_the_model_read_the_policy_not_thresholds() -> None:
    # It files the policy's severity and copies the policy's evidence (which names missing
    # data and text addressed to the assessor) instead of judging thresholds itself.
    assert "severity_floor" in SMALL_MODEL_SYSTEM_PROMPT
    assert '"evidence"' in SMALL_MODEL_SYSTEM_PROMPT
    assert "0.05" not in SMALL_MODEL_SYSTEM_PROMPT  # it compared 0.012 with 0.05 wrongly


def test_default_prompt_states_the_guidelines_and_the_rules() -> None:
    prompt = DEFAULT_SYSTEM_PROMPT
    assert "FIRST" in prompt
    assert "exactly ONE report" in prompt
    assert "do NOT" in prompt
    assert "5%" in prompt
    assert "2%" in prompt
    assert "Missing data" in prompt
    for word in ("high", "medium", "low", "does not exist"):
        assert word in prompt
    for area in ("payments", "authentication", "security", "migrations"):
        assert area in prompt


def test_small_prompt_is_much_shorter() -> None:
    assert len(SMALL_MODEL_SYSTEM_PROMPT) < len(DEFAULT_SYSTEM_PROMPT) / 2


@pytest.mark.parametrize(
    ("model", "small"),
    [
        ("qwen2.5-coder:1.5b", True),
        ("llama3.2:3b", True),
        ("Qwen/Qwen2.5-1.5B-Instruct", True),
        ("phi3:mini", True),
        ("qwen3:4b", True),
        ("llama3.1:8b", False),
        ("llama3.3:70b", False),
        ("claude-sonnet-4-5", False),
        ("gpt-4o-mini", False),
        ("anthropic/claude-3.5-haiku", False),
    ],
)
def test_small_models_are_recognised_by_name(model: str, small: bool) -> None:
    assert is_small_model(model) is small


def test_profile_for_picks_by_model_and_honours_overrides() -> None:
    assert profile_for("ollama", "qwen2.5-coder:1.5b") is SMALL_MODEL_PROFILE
    assert profile_for("openai", "qwen2.5-coder:1.5b") is SMALL_MODEL_PROFILE
    assert profile_for("ollama", "llama3.3:70b") is DEFAULT_PROFILE
    assert profile_for("anthropic", "claude-sonnet-4-5", "small") is SMALL_MODEL_PROFILE
    assert profile_for("ollama", "qwen2.5:1.5b", "default") is DEFAULT_PROFILE
    assert profile_for("ollama", "qwen2.5:1.5b", "auto") is SMALL_MODEL_PROFILE
    with pytest.raises(ConfigurationError, match="Unknown prompt profile"):
        profile_for("ollama", "x", "tiny")


def test_small_profile_keeps_small_models_on_track() -> None:
    assert SMALL_MODEL_PROFILE.temperature == 0
    assert SMALL_MODEL_PROFILE.max_text_only_nudges >= DEFAULT_PROFILE.max_text_only_nudges


@pytest.mark.parametrize("profile", list(PROFILES.values()), ids=list(PROFILES))
def test_each_profile_says_plainly_whether_it_drills_down(profile: PromptProfile) -> None:
    # Issue 40: the small profile has none, and its run says so rather than leave a reader to
    # think the model looked at the tests.
    assert profile.reads
    assert profile.reads.startswith("No drill-downs.") is (not profile.drill_down)
    # What stands in for the one drill-down that matters: the brief view's first suspects.
    if profile.brief_summary:
        assert "first suspect commit" in profile.reads
