"""Run Debian's promtool and vmalert as subprocesses, with one clear line when missing.

vmalert (VictoriaMetrics, MetricsQL) is the second engine: every rendered Prometheus rule
file must load in ``vmalert -dryRun`` too, which keeps the rules within PromQL that both
accept."""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

INSTALL_HINT = {
    "promtool": "install Debian's prometheus package (sudo apt-get install prometheus) "
                "or put promtool on PATH",
    "vmalert": "install Debian's victoria-metrics package (sudo apt-get install "
               "victoria-metrics) or put vmalert on PATH",
    "vmalert-tool": "put VictoriaMetrics' vmalert-tool (1.9x and later; Debian unstable's "
                    "victoria-metrics package ships it) on PATH",
}


class ToolMissing(RuntimeError):
    pass


@dataclass
class Result:
    ok: bool
    output: str


# The promtool release obsgen is tested with (Debian bookworm); older ones lack test-file
# features the fixtures use.
MIN_PROMTOOL = (2, 42, 0)
# One rule with the constructs obsgen renders that older MetricsQL parsers refuse.
_VMALERT_PROBE = """groups:
- name: probe
  rules:
  - record: job:probe:max
    expr: |
      max by (job_id) (quantile_over_time(0.5, a:b:c[5m]) > bool 1.1)
      * on (job_id) group_left (node) (topk by (job_id) (1, timestamp(d)) * 0 + 1)
      or label_replace(count by (job_id) ((e != e) or (e == +Inf)), "signal", "x", "", "")
"""


# A promtool to use instead of the one on PATH (e.g. Prometheus 3's beside Debian 12's 2.42).
ENV = "OBSGEN_PROMTOOL"


def find(tool: str = "promtool") -> str:
    chosen = os.environ.get(ENV) if tool == "promtool" else None
    path = shutil.which(chosen) if chosen else shutil.which(tool)
    if chosen and not path:
        raise ToolMissing(f"{ENV}={chosen}: no executable promtool there")
    if not path:
        raise ToolMissing(f"{tool} not found: {INSTALL_HINT.get(tool, 'put it on PATH')}")
    problem = _too_old(tool, path)
    if problem:
        raise ToolMissing(f"{path} {problem}: {INSTALL_HINT[tool]}")
    return path


@functools.lru_cache(maxsize=None)
def _too_old(tool: str, path: str) -> str | None:
    """Why the tool at ``path`` cannot serve obsgen, or None."""
    if tool == "promtool":
        out = _run([path, "--version"], timeout=30).output
        m = re.search(r"version (\d+)\.(\d+)\.(\d+)", out)
        if not m:
            return f"does not report a version ({out.splitlines()[0] if out else 'no output'!r})"
        version = tuple(int(x) for x in m.groups())
        if version < MIN_PROMTOOL:
            return (f"is version {'.'.join(map(str, version))}, older than the "
                    f"{'.'.join(map(str, MIN_PROMTOOL))} obsgen needs")
    if tool == "vmalert":  # Debian's build reports no version: probe what it parses instead
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as fh:
            fh.write(_VMALERT_PROBE)
            fh.flush()
            if not _run([path, "-dryRun", "-loggerLevel=ERROR", f"-rule={fh.name}"], timeout=60).ok:
                return "cannot parse the PromQL obsgen renders (it needs vmalert >= 1.79)"
    return None


def _run(args: list[str], cwd: Path | None = None, timeout: float = 600) -> Result:
    """Run a tool; its stdout and stderr together (promtool prints failures on stderr)."""
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    return Result(proc.returncode == 0, (proc.stdout + proc.stderr).strip())


def version(tool: str = "promtool") -> str:
    return _run([find(tool), "--version"]).output.splitlines()[0]


def windows() -> str:
    """The promtool that runs, its version and the range windows it evaluates: Prometheus 3
    leaves a window's left end out (a sample exactly ``window`` old is not in it), 2 holds
    both ends."""
    path = find()
    m = re.search(r"version (\d+)\.(\d+)\.(\d+)", version())
    major = int(m.group(1)) if m else 0
    shape = ("range windows open on the left (Prometheus 3)" if major >= 3
             else "range windows closed at both ends (Prometheus 2)")
    return f"{path} {'.'.join(m.groups()) if m else '(no version)'}: {shape}"


def check_rules(paths: list[Path], lint: bool = False, binary: str | None = None) -> Result:
    args = [binary or find(), "check", "rules"]
    if lint:
        args.append("--lint=all")
    return _run(args + [str(p) for p in paths])


def test_rules(paths: list[Path], cwd: Path | None = None, binary: str | None = None) -> Result:
    return _run([binary or find(), "test", "rules"] + [str(p) for p in paths], cwd=cwd)


def vmalert_tool_unittest(path: Path, cwd: Path | None = None) -> Result:
    """VictoriaMetrics' own rule unit tests on one test file (vmalert-tool starts a
    VictoriaMetrics of its own on a free port and evaluates as vmalert does). Without the
    group's name as a label on alerts and records, as promtool writes them (vmalert's
    default adds it, and asks every alert test for its group)."""
    return _run([find("vmalert-tool"), "unittest", "--disableAlertgroupLabel",
                 f"--files={path}"], cwd=cwd)


def vmalert_check(paths: list[Path], binary: str | None = None) -> Result:
    """Load rule files in vmalert without evaluating them (exit 0 when they parse)."""
    args = [binary or find("vmalert"), "-dryRun", "-loggerLevel=ERROR"] + [f"-rule={p}" for p in paths]
    return _run(args)
