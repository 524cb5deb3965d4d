"""Benchmark: the culprit's rank among the suspects on synthetic histories that reproduce the
shapes of real bugs (issue 38; `bench/suspect_shapes.py`, `bench/suspect_shapes_calls.py`):
Python run by pytest, JavaScript in jest-junit's default report. The figure is the rank of each
shape's culprit (1 = first) over its failing tests (the worst of them), ranked from what the CI
client sends; the target is every culprit first."""

from __future__ import annotations

import asyncio
import shutil

from bench.harness import Context, Result, Skip
from bench.suspect_shapes import SHAPES, run_shape
from bench.suspect_shapes_calls import CALL_SHAPES

NAME = "suspects"
# --quick: one shape of each kind (a test package, a schema change with setup errors, node's
# require through package.json); each builds its history with git and runs its test runner.
QUICK_SHAPES = (
    "tests package (tomli)",
    "schema change, setup errors",
    "require('../') (commander.js)",
)


async def run(ctx: Context) -> list[Result]:
    if shutil.which("git") is None:
        raise Skip("the git command is not installed")
    rows: list[Result] = []
    for index, shape in enumerate((*SHAPES, *CALL_SHAPES)):
        if ctx.quick and shape.name not in QUICK_SHAPES:
            continue
        if shape.language == "javascript" and shutil.which("node") is None:
            ctx.say(f"{shape.name}: node is not installed, left out")
            continue
        outcome = await asyncio.to_thread(run_shape, shape, ctx.scratch / f"suspects-{index}")
        ctx.say(f"{shape.name}: culprit at {outcome.rank}; {outcome.first_reason}")
        rows.append(
            Result(
                NAME,
                f"{shape.language}: {shape.name}",
                "rank_from_head",
                "rank",
                value=outcome.rank,
                target="1 (the culprit first)",
                met=outcome.rank == 1,
                note=f"{outcome.failures} failing test(s); worst rank over them",
            )
        )
    return rows
