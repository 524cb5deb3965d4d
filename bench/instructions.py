"""Instructions per assessment of the overhead benchmark's contestants, counted by callgrind.

`bench.overhead.count_instructions` runs this module as a child process under callgrind with
instrumentation off (so the start and imports are not counted, and run faster); the child
builds its contestant, runs `WARMUP` assessments uncounted, then counts a batch of `small`
assessments and a batch of `large` (`bench.callgrind.Section`): their difference over
`large - small` is one assessment.
The scripted model server and release API run in a process of their own, not counted.

    uv run python -m bench.instructions detective [--stream] [--small 1 --large 6]

counts one contestant (the whole thing under valgrind). Contestants: `floor`, `detective`
(tracing on, trace files written, as in the benchmark), `untraced` (Detective with no telemetry
configured: the wrappers on a no-op tracer), `no-files` (tracing and metrics on, no trace files:
the exporter's share).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

from bench.callgrind import Section, per_unit
from bench.overhead import MODEL_CALLS, count_instructions

CONTESTANTS = ("floor", "detective", "untraced", "no-files")
WARMUP = 3


async def _assessor(
    contestant: str,
    url: str,
    traces: Path,
    stream: bool,
    llm_client: httpx.AsyncClient,
    api_client: httpx.AsyncClient,
) -> Callable[[], Awaitable[None]]:
    from agent.config import AgentSettings
    from agent.providers.openai_compat import to_wire_tool
    from agent.telemetry.setup import TelemetryConfig, configure_telemetry
    from agent.testing.wire import OPENAI_MODEL
    from bench.overhead import (
        API_KEY,
        API_TOKEN,
        PROMPT,
        DetectiveContestant,
        Floor,
        check_detective,
        check_floor,
    )

    if contestant in ("detective", "no-files"):
        configure_telemetry(
            TelemetryConfig(
                data_dir=traces,
                otlp_endpoint=None,
                capture_content=False,
                file_export=contestant == "detective",
            ),
            set_global=False,
        )
    settings = AgentSettings(
        provider="openai",
        model=OPENAI_MODEL,
        base_url=f"{url}/v1",
        openai_api_key=API_KEY,
        api_url=url,
        api_token=API_TOKEN,
        data_dir=traces,
    )
    detective = DetectiveContestant(settings, f"{url}/v1", llm_client, api_client, stream=stream)
    if contestant != "floor":

        async def assess_detective() -> None:
            check_detective(await detective.assess())

        return assess_detective
    shape = detective.build()
    config = shape.config
    tools = [to_wire_tool(t) for t in shape.tools.get_tools()]
    await shape.aclose()
    floor = Floor(
        llm_client,
        f"{url}/v1",
        url,
        config.system_prompt,
        tools,
        stream=stream,
        max_tokens=config.max_tokens,
        temperature=config.temperature,
    )

    async def assess_floor() -> None:
        check_floor(await floor.assess(PROMPT))

    return assess_floor


def _flush() -> None:
    """The trace writer's work for the batch is part of it (it runs on a thread)."""
    from agent.telemetry.setup import active_telemetry

    telemetry = active_telemetry()
    if telemetry is not None:
        telemetry.force_flush()


async def _child(
    contestant: str, stream: bool, small: int, large: int, traces: Path, out_dir: Path | None
) -> dict[str, float]:
    from bench.procs import model_server

    with model_server() as url:
        async with (
            httpx.AsyncClient(timeout=30) as llm_client,
            httpx.AsyncClient(timeout=30) as api_client,
        ):
            assess = await _assessor(contestant, url, traces, stream, llm_client, api_client)
            for _ in range(WARMUP):
                await assess()
            _flush()
            # The start-up heap out of the collector's sight, as in the wall-time benchmark.
            gc.collect()
            gc.freeze()
            if out_dir is None:  # not under callgrind: a dry run of the same steps
                for _ in range(small + large):
                    await assess()
                return {"assessments": small + large}
            section = Section(out_dir)
            section.start()
            counts = []
            for size in (small, large):
                for _ in range(size):
                    await assess()
                _flush()
                counts.append(section.dump())
            section.stop()
    per_assessment = per_unit(counts, (small, large))
    return {
        "per_assessment": per_assessment,
        "per_model_call": per_assessment / MODEL_CALLS,
        "batches": counts,  # type: ignore[dict-item]
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("contestant", choices=CONTESTANTS)
    parser.add_argument("--small", type=int, default=1)
    parser.add_argument("--large", type=int, default=6)
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--out", type=Path, help="callgrind's output folder (set by count())")
    args = parser.parse_args()
    if args.out is None:
        # Run by hand: count this contestant now, in a child under callgrind.
        with tempfile.TemporaryDirectory(prefix="bench-instructions-") as scratch:
            figures = count_instructions(
                args.contestant,
                stream=args.stream,
                small=args.small,
                large=args.large,
                scratch=Path(scratch),
                timeout_s=600,
            )
        print(json.dumps(figures))
        return
    from agent.telemetry.setup import shutdown_telemetry

    with tempfile.TemporaryDirectory(prefix="bench-instructions-") as traces:
        figures = asyncio.run(
            _child(args.contestant, args.stream, args.small, args.large, Path(traces), args.out)
        )
        shutdown_telemetry()
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
