"""Run Debian's promtool and vmalert as subprocesses, with one clear line when missing.

vmalert (VictoriaMetrics, MetricsQL) is the second engine: every rendered Prometheus rule
file must load in ``vmalert -dryRun`` too, which keeps the rules within PromQL that both
accept."""
from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

INSTALL_HINT = {
    "promtool": "install Debian's prometheus package (sudo apt-get install prometheus) "
                "or put promtool on PATH",
    "vmalert": "install Debian's victoria-metrics package (sudo apt-get install "
               "victoria-metrics) or put vmalert on PATH",
}


class ToolMissing(RuntimeError):
    pass


@dataclass
class Result:
    ok: bool
    output: str


def find(tool: str = "promtool") -> str:
    path = shutil.which(tool)
    if not path:
        raise ToolMissing(f"{tool} not found: {INSTALL_HINT.get(tool, 'put it on PATH')}")
    return path


def _run(args: list[str], cwd: Path | None = None, timeout: float = 600) -> Result:
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    return Result(proc.returncode == 0, (proc.stdout + proc.stderr).strip())


def version(tool: str = "promtool") -> str:
    return _run([find(tool), "--version"]).output.splitlines()[0]


def check_rules(paths: list[Path], lint: bool = False) -> Result:
    args = [find(), "check", "rules"]
    if lint:
        args.append("--lint=all")
    return _run(args + [str(p) for p in paths])


def test_rules(paths: list[Path]) -> Result:
    return _run([find(), "test", "rules"] + [str(p) for p in paths])


def vmalert_check(paths: list[Path]) -> Result:
    """Load rule files in vmalert without evaluating them (exit 0 when they parse)."""
    args = [find("vmalert"), "-dryRun", "-loggerLevel=ERROR"] + [f"-rule={p}" for p in paths]
    return _run(args)
