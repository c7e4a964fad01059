"""The CI snippets users copy: the GitHub Actions steps run here as plain shell against a
scratch "team rules repository", pass when it is current and fail when it is stale."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "ci"

pytestmark = pytest.mark.promtool


def github_steps() -> tuple[dict, list[dict]]:
    job = yaml.safe_load((EXAMPLES / "github-actions.yml").read_text())["jobs"]["rules"]
    return job["env"], [s for s in job["steps"] if "run" in s]


def run_steps(repo: Path, env: dict[str, str]) -> list[tuple[str, int, str]]:
    """Run every `run:` step with bash in ``repo``; stop at the first failure."""
    results = []
    for step in github_steps()[1]:
        proc = subprocess.run(["bash", "-eo", "pipefail", "-c", step["run"]], cwd=repo, env=env,
                              capture_output=True, text=True, timeout=600)
        results.append((step.get("name", step["run"]), proc.returncode, proc.stdout + proc.stderr))
        if proc.returncode:
            break
    return results


@pytest.fixture(scope="module")
def team_repo(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    repo = tmp_path_factory.mktemp("team-rules")
    (repo / "team.yaml").write_text("selector: {cluster: a}\nteams: {platform: ml-infra}\n")
    venv = repo / ".venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {**os.environ, **github_steps()[0]}
    env["OBSGEN_PIP_SPEC"] = str(ROOT)  # this checkout instead of the pinned release
    env["PATH"] = f"{venv / 'bin'}:{env['PATH']}"
    env.pop("VIRTUAL_ENV", None)
    shim = repo / "shim"
    shim.mkdir()
    if os.geteuid() == 0 and not shutil.which("sudo"):  # containers run as root without sudo
        (shim / "sudo").write_text('#!/bin/sh\nexec "$@"\n')
        (shim / "sudo").chmod(0o755)
        env["PATH"] = f"{shim}:{env['PATH']}"
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(ROOT)],
                   check=True, env=env)
    subprocess.run(["obsgen", "render", "--config", "team.yaml", "--out", "."], cwd=repo,
                   check=True, env=env, capture_output=True)
    (repo / "tests" / "promtool").mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "promtool" / "gradients.yaml", repo / "tests" / "promtool")
    return repo, env


def test_github_steps_pass_on_a_current_repository(team_repo):
    repo, env = team_repo
    # The team's own fixture was written for the default config; give it default rules.
    (repo / "team.yaml").write_text("")
    subprocess.run(["obsgen", "render", "--config", "team.yaml", "--out", "."], cwd=repo,
                   check=True, env=env, capture_output=True)
    results = run_steps(repo, env)
    failed = [(name, out) for name, code, out in results if code]
    assert not failed, failed
    assert len(results) == len(github_steps()[1])


def test_github_steps_fail_when_a_generated_file_is_stale(team_repo):
    repo, env = team_repo
    (repo / "team.yaml").write_text("thresholds: {straggler_ratio: 1.3}\n")  # config changed, not rendered
    results = run_steps(repo, env)
    name, code, out = results[-1]
    assert code == 1 and name == "Generated files are up to date", results
    assert "rules/stragglers.yaml: stale" in out


def test_gitlab_example_runs_the_same_checks():
    gitlab = yaml.safe_load((EXAMPLES / "gitlab-ci.yml").read_text())["obsgen"]
    github_env, steps = github_steps()
    assert gitlab["variables"] == github_env
    lines = "\n".join(gitlab["before_script"] + gitlab["script"])
    for needle in ("obsgen check --config \"$OBSGEN_CONFIG\" --out .", "promtool check rules rules/*.yaml",
                   "promtool test rules", "apt-get install -y -qq --no-install-recommends prometheus"):
        assert needle in lines, needle
