"""Instructions per assessment, for valgrind's callgrind: N assessments of one contestant of
the overhead benchmark in this process, against the scripted model server in a process of
its own (not counted).

    env -u OTEL_EXPORTER_OTLP_ENDPOINT valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.%p \\
        .venv/bin/python -m bench.instructions detective --n 120
    (and --n 20; the difference of the two totals, divided by 100, is one assessment; the
    venv's python itself, since `uv run` would make uv the process callgrind follows)

Callgrind counts the same however busy the machine is, so two runs of this compare code, not
load. Contestants: `floor`, `detective` (tracing on, trace files written, as in the benchmark),
`untraced` (Detective with no telemetry configured: the wrappers on a no-op tracer),
`no-files` (tracing and metrics on, no trace files: the exporter's share).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

import httpx

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
from bench.procs import model_server


async def _main(contestant: str, n: int, stream: bool, traces: Path) -> None:
    with model_server() as url:
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
        async with (
            httpx.AsyncClient(timeout=30) as llm_client,
            httpx.AsyncClient(timeout=30) as api_client,
        ):
            detective = DetectiveContestant(
                settings, f"{url}/v1", llm_client, api_client, stream=stream
            )
            if contestant == "floor":
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
                for _ in range(n):
                    check_floor(await floor.assess(PROMPT))
            else:
                for _ in range(n):
                    check_detective(await detective.assess())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("contestant", choices=("floor", "detective", "untraced", "no-files"))
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--stream", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-instructions-") as traces:
        asyncio.run(_main(args.contestant, args.n, args.stream, Path(traces)))
        from agent.telemetry.setup import shutdown_telemetry

        # The exporter's last writes are part of the work measured.
        shutdown_telemetry()


if __name__ == "__main__":
    main()
