"""A composite action's `runs.steps` run as GitHub's runner runs them: in order, each `run:`
under `bash --noprofile --norc -eo pipefail`, with `${{ inputs.* }}`, `${{ github.* }}`,
`${{ runner.temp }}` and `${{ steps.<id>.outputs.* }}` expanded, GITHUB_OUTPUT, GITHUB_PATH,
GITHUB_STEP_SUMMARY and GITHUB_WORKSPACE set. The job stops at the first step that fails, as
GitHub's does."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

EXPRESSION = re.compile(r"\$\{\{\s*([^}]+?)\s*\}\}")


@dataclass
class ActionRun:
    exit_code: int = 0
    summary: str = ""
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)
    logs: list[str] = field(default_factory=list)


def _outputs(path: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if "=" in line:
            name, value = line.split("=", 1)
            found[name] = value
    return found


def run_action(
    action_dir: Path,
    inputs: dict[str, str],
    workspace: Path,
    environment: dict[str, str],
    *,
    ref_name: str = "main",
    timeout: float = 600,
) -> ActionRun:
    action: dict[str, Any] = yaml.safe_load((action_dir / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    given = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()}
    unknown = set(inputs) - set(given)
    assert not unknown, f"the action has no inputs {sorted(unknown)}"
    temp = workspace / "_runner_temp"
    temp.mkdir(parents=True, exist_ok=True)
    summary = temp / "step_summary.md"
    summary.touch()
    context = {"github.action_path": str(action_dir), "github.ref_name": ref_name,
               "github.workspace": str(workspace), "runner.temp": str(temp)}  # fmt: skip
    done = ActionRun()

    def expand(text: str) -> str:
        def value(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("inputs."):
                return values[name.removeprefix("inputs.")]
            if name.startswith("steps."):
                _, step, _, output = name.split(".", 3)
                return done.outputs.get(step, {}).get(output, "")
            return context[name]

        return EXPRESSION.sub(value, text)

    values: dict[str, str] = {}
    for name, default in given.items():
        values[name] = inputs.get(name, EXPRESSION.sub(lambda m: context[m.group(1)], default))
    path_additions: list[str] = []
    for number, step in enumerate(action["runs"]["steps"]):
        assert step.get("shell") == "bash", "every step of the action names its shell"
        output = temp / f"output_{number}"
        github_path = temp / f"path_{number}"
        output.touch()
        github_path.touch()
        step_environment = {
            **environment,
            "GITHUB_ACTIONS": "true",
            "CI": "true",
            "GITHUB_WORKSPACE": str(workspace),
            "GITHUB_STEP_SUMMARY": str(summary),
            "GITHUB_OUTPUT": str(output),
            "GITHUB_PATH": str(github_path),
            "GITHUB_ACTION_PATH": str(action_dir),
            "GITHUB_REF_NAME": ref_name,
            "RUNNER_TEMP": str(temp),
            **{name: expand(str(value)) for name, value in (step.get("env") or {}).items()},
        }
        step_environment["PATH"] = os.pathsep.join(
            [*path_additions, environment.get("PATH", "/usr/bin:/bin")]
        )
        script = temp / f"step_{number}.sh"
        script.write_text(expand(step["run"]))
        finished = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            capture_output=True,
            text=True,
            env=step_environment,
            cwd=workspace,
            timeout=timeout,
        )
        done.logs.append(f"--- {step.get('name')}\n{finished.stdout}{finished.stderr}")
        if "id" in step:
            done.outputs[step["id"]] = _outputs(output)
        path_additions = github_path.read_text().split() + path_additions
        done.exit_code = finished.returncode
        if finished.returncode != 0:
            break
    done.summary = summary.read_text()
    return done
