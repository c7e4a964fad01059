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

pytestmark = [pytest.mark.promtool, pytest.mark.long]  # minutes: make long (CI)


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
    (repo / "tests" / "promtool").mkdir(parents=True, exist_ok=True)
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
    for needle in ("obsgen check --config \"$OBSGEN_CONFIG\" --out .",
                   "obsgen test --config \"$OBSGEN_CONFIG\" --out .",
                   "apt-get install -y -qq --no-install-recommends prometheus"):
        assert needle in lines, needle


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=ci", "-c", "user.email=ci@example.org", *args],
                   cwd=cwd, check=True, capture_output=True)


def test_the_users_loop_edit_render_commit_and_ci_in_a_clone(team_repo, tmp_path):
    """A team repository: edit team.yaml, `obsgen render`, commit; CI checks out a clone
    and runs the steps. A config edited without a render fails, and so does a rule that
    no longer fires as its scenario says."""
    _, env = team_repo
    origin = tmp_path / "team"
    origin.mkdir()
    _git(origin, "init", "-q", "-b", "main")
    (origin / "team.yaml").write_text("metrics: {train_compute_seconds: megatron_compute_seconds}\n"
                                      "labels: {job_id: run}\nthresholds: {straggler_ratio: 1.15}\n")
    subprocess.run(["obsgen", "render", "--config", "team.yaml"], cwd=origin, check=True, env=env,
                   capture_output=True)
    assert (origin / "tests" / "promtool" / "obsgen-stragglers.yaml").exists()
    _git(origin, "add", "-A")
    _git(origin, "commit", "-q", "-m", "obsgen rules")

    def ci() -> list[tuple[str, int, str]]:
        clone = tmp_path / f"ci-{len(list(tmp_path.glob('ci-*')))}"
        _git(tmp_path, "clone", "-q", str(origin), str(clone))
        return run_steps(clone, env)

    results = ci()
    assert all(code == 0 for _, code, _ in results) and len(results) == len(github_steps()[1]), results
    scenarios_out = results[-1][2]
    assert "fires Train_Straggler_Persistent for it alone" in scenarios_out and " 0 failed" in scenarios_out

    (origin / "team.yaml").write_text((origin / "team.yaml").read_text().replace("1.15", "1.2"))
    _git(origin, "commit", "-qam", "threshold, not rendered")
    name, code, out = ci()[-1]
    assert code == 1 and name == "Generated files are up to date", out
    assert "tests/promtool/obsgen-stragglers.yaml: stale" in out

    subprocess.run(["obsgen", "render", "--config", "team.yaml"], cwd=origin, check=True, env=env,
                   capture_output=True)
    rules = origin / "rules" / "stragglers.yaml"  # a hand edit that blinds the alert
    rules.write_text(rules.read_text().replace("> 1.2", "> 2.5"))
    _git(origin, "commit", "-qam", "rendered, and a broken rule")
    results = ci()
    assert results[-1][1] == 1 and "rules/stragglers.yaml: stale" in results[-1][2], results
    steps = github_steps()[1]  # the scenario step on its own fails too, naming the scenario
    clone = tmp_path / "ci-last"
    _git(tmp_path, "clone", "-q", str(origin), str(clone))
    proc = subprocess.run(["bash", "-eo", "pipefail", "-c", steps[-1]["run"]], cwd=clone, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1
    assert "FAILED: one GPU 60% slower in an 8-rank data-parallel job fires Train_Straggler_Persistent" in proc.stderr
