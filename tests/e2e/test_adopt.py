"""A user's first hour, from the wheel `make dist` builds: installed on its own (not this
checkout), `obsgen init`, `render` and `test` in an empty repository, for a Megatron job."""
from __future__ import annotations

import glob
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from . import harness

pytestmark = pytest.mark.skipif(
    subprocess.run([sys.executable, "-c", "import build"], capture_output=True).returncode != 0
    and os.environ.get("CI") != "true", reason="build missing: make e2e installs it")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out),
                           str(harness.ROOT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (path,) = glob.glob(str(out / "obsgen-*-py3-none-any.whl"))
    return Path(path)


def test_the_wheel_alone_takes_a_megatron_team_from_init_to_a_passing_test(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--disable-pip-version-check", "--target", str(target), str(wheel)],
                   check=True)
    # the wheel's obsgen first, this venv's pinned dependencies after it, no checkout
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), sysconfig.get_paths()["purelib"]])}
    repo = tmp_path / "repo"
    repo.mkdir()

    def obsgen(*args):
        return subprocess.run([sys.executable, "-I", "-c",
                               "import sys, os; sys.path[:0] = os.environ['PYTHONPATH'].split(os.pathsep); "
                               "from obsgen.cli import main; sys.exit(main())", *args],
                              cwd=repo, env=env, capture_output=True, text=True)

    where = obsgen("--version")
    assert where.returncode == 0 and where.stdout.startswith("obsgen "), where.stderr
    probe = subprocess.run([sys.executable, "-I", "-c", "import sys, os; sys.path[:0] = "
                            "os.environ['PYTHONPATH'].split(os.pathsep); import obsgen; "
                            "print(obsgen.__file__)"], env=env, capture_output=True, text=True)
    assert probe.stdout.startswith(str(target)), probe.stdout + probe.stderr
    for step in (("init", "--preset", "megatron"), ("render",), ("test",)):
        done = obsgen(*step)
        assert done.returncode == 0, (step, done.stdout[-2000:], done.stderr[-2000:])
    assert " 0 failed" in done.stdout.splitlines()[-1]
    assert (repo / "docs" / "runbooks" / "Train_Straggler_Persistent.md").exists()
    assert (repo / "alertmanager").is_dir() and (repo / "dashboards" / "provisioning").is_dir()
