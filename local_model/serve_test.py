"""Serving: the command line, a background server (a stand-in llama-server), `up`'s plan."""

from __future__ import annotations

import inspect
import os
from pathlib import Path

import pytest

from local_model.paths import LocalModelPaths, write_json
from local_model.serve import (
    CHAT_TEMPLATE,
    UpPlan,
    agent_environment,
    cpu_reports_amx,
    health,
    plan_for_up,
    running_server,
    server_argv,
    start_background_server,
    stop_background_server,
)
from local_model.spec import MODEL, SETUP_GUIDANCE, ServerError
from local_model.status import status
from local_model.testing import install_fake_server


def test_server_argv_binds_to_loopback_with_our_chat_template(paths: LocalModelPaths) -> None:
    argv = server_argv(paths, 8123, context=4096, threads=2)

    assert argv[0] == str(paths.binary)
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert argv[argv.index("--port") + 1] == "8123"
    assert "--jinja" in argv
    assert argv[argv.index("--chat-template-file") + 1] == str(CHAT_TEMPLATE)
    assert argv[argv.index("--ctx-size") + 1] == "4096"
    assert argv[argv.index("--alias") + 1] == MODEL.alias
    assert agent_environment(8123, 4096) == {
        "DETECTIVE_PROVIDER": "local",
        "DETECTIVE_BASE_URL": "http://127.0.0.1:8123/v1",
        "DETECTIVE_MODEL": MODEL.alias,
        "DETECTIVE_CONTEXT_WINDOW": "4096",
    }


@pytest.mark.parametrize(
    ("flags", "amx"),
    [
        ("fpu avx2 avx512f amx_bf16 amx_tile amx_int8", True),
        ("fpu avx2 avx512f avx512_vnni", False),
        ("fpu avx2 amx_bf16", False),
    ],
)
def test_a_cpu_reporting_amx_gets_no_weight_repacking(
    paths: LocalModelPaths, tmp_path: Path, flags: str, amx: bool
) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n", encoding="utf-8")

    assert cpu_reports_amx(cpuinfo) is amx
    assert ("--no-repack" in server_argv(paths, 8123, amx=amx)) is amx


def test_an_unreadable_cpuinfo_reports_no_amx(tmp_path: Path) -> None:
    assert cpu_reports_amx(tmp_path / "missing") is False


def test_serve_status_and_stop_a_background_server(paths: LocalModelPaths) -> None:
    install_fake_server(paths)

    server = start_background_server(paths, timeout=20)
    try:
        assert health(server.port) == "ok"
        assert running_server(paths) == server
        # Serving again returns the one that runs.
        assert start_background_server(paths) == server
        report = "\n".join(status(paths).lines())
        assert f"pid {server.pid} at http://127.0.0.1:{server.port}/v1" in report
        assert "health: ok" in report
        assert "Model:     installed and verified" in report
    finally:
        stopped = stop_background_server(paths)

    assert stopped is True
    assert health(server.port) == "down"
    assert not paths.pid_file.exists()
    assert stop_background_server(paths) is False


def test_a_server_that_dies_on_start_reports_its_log(paths: LocalModelPaths) -> None:
    install_fake_server(
        paths, "#!{python}\nimport sys\nprint('error: no memory', flush=True)\nsys.exit(1)\n"
    )

    with pytest.raises(ServerError, match="exited before it was ready") as caught:
        start_background_server(paths, timeout=20)

    assert "error: no memory" in str(caught.value)
    assert not paths.pid_file.exists()


def test_serve_needs_the_install(paths: LocalModelPaths) -> None:
    with pytest.raises(ServerError, match=r"uv run manage\.py local_model install"):
        start_background_server(paths)


def test_a_stale_pid_file_is_not_trusted(paths: LocalModelPaths) -> None:
    paths.root.mkdir(parents=True)
    # Our own pid is alive, but it is not llama-server: never signal it.
    write_json(paths.pid_file, {"pid": os.getpid(), "port": 1, "started_at": "earlier"})

    assert running_server(paths) is None
    assert stop_background_server(paths) is False


# ---- up -------------------------------------------------------------------------------------


def test_up_uses_the_local_model_only_when_nothing_else_is_configured(
    paths: LocalModelPaths,
) -> None:
    def plan(**options: object) -> UpPlan:
        settings = {"provider": None, "base_url": None, "hosted_key": False, **options}
        return plan_for_up(paths, **settings)  # type: ignore[arg-type]

    # Nothing installed, nothing configured: say how to get either.
    nothing = plan()
    assert not nothing.start_local
    assert nothing.guidance == SETUP_GUIDANCE
    assert "uv run manage.py local_model install" in nothing.guidance
    assert "ANTHROPIC_API_KEY" in nothing.guidance
    asked = plan(provider="local")
    assert not asked.start_local
    assert "not installed" in (asked.guidance or "")

    install_fake_server(paths)
    assert plan().start_local
    assert plan(provider="local").start_local
    # Anything else configured wins, silently.
    assert plan(hosted_key=True) == UpPlan(start_local=False)
    assert plan(provider="ollama") == UpPlan(start_local=False)
    # A llama-server of one's own, at a URL: nothing to start.
    assert plan(provider="local", base_url="http://127.0.0.1:9/v1") == UpPlan(start_local=False)


def test_the_server_runs_one_thread_unless_told(paths: LocalModelPaths) -> None:
    # Two threads on two shared cores fell to 0.9-3.1 tokens/s under load where one kept 10.8
    # (issue 40): one is the default of `serve` and `up`'s background server.
    argv = server_argv(paths, 8123, context=4096)
    assert argv[argv.index("--threads") + 1] == "1"
    assert inspect.signature(start_background_server).parameters["threads"].default == 1
    told = server_argv(paths, 8123, context=4096, threads=2)
    assert told[told.index("--threads") + 1] == "2"
