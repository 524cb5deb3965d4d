"""A score and the checks behind it, and what an evaluator is."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from evals.runner.transcript import Transcript
from evals.scenario import Scenario


class Check(BaseModel):
    """One named condition behind a score."""

    model_config = ConfigDict(frozen=True)

    name: str
    passed: bool
    detail: str = ""
    # A critical check that fails fails the trial, whatever its dimension.
    critical: bool = False


class Score(BaseModel):
    model_config = ConfigDict(frozen=True)

    dimension: str
    value: float = Field(ge=0.0, le=1.0)
    passed: bool
    details: list[str] = Field(default_factory=list)
    checks: list[Check] = Field(default_factory=list)
    # The evaluator itself could not score (e.g. the judge's provider failed).
    errored: bool = False

    @classmethod
    def from_checks(
        cls, dimension: str, checks: list[Check], *, value: float | None = None
    ) -> Score:
        if value is None:
            value = sum(c.passed for c in checks) / len(checks) if checks else 1.0
        details = [
            f"{'ok' if c.passed else 'FAIL'} {c.name}{': ' + c.detail if c.detail else ''}"
            for c in checks
        ]
        return cls(
            dimension=dimension,
            value=round(min(1.0, max(0.0, value)), 6),
            passed=all(c.passed for c in checks),
            details=details,
            checks=checks,
        )

    @property
    def failed_checks(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]


@runtime_checkable
class Evaluator(Protocol):
    """A deterministic evaluator. Returns None when the dimension does not apply."""

    dimension: str

    def evaluate(self, scenario: Scenario, transcript: Transcript) -> Score | None: ...


@runtime_checkable
class AsyncEvaluator(Protocol):
    dimension: str

    async def evaluate(self, scenario: Scenario, transcript: Transcript) -> Score | None: ...


def listing(names: Iterable[str]) -> str:
    return ", ".join(names) or "none"
