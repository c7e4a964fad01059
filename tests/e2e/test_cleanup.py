"""No process the tests start survives the test process: not when a test fails, not when
the test process itself is killed with SIGKILL and no finalizer runs."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from . import harness

SCRIPT = textwrap.dedent("""
    import shutil, sys, time
    from pathlib import Path
    from tests.e2e import harness
    tmp = Path(sys.argv[1])
    procs = harness.Processes(tmp)
    port = harness.free_port()
    procs.start("prometheus", [shutil.which("prometheus"), f"--config.file={tmp / 'p.yml'}",
                               f"--storage.tsdb.path={tmp / 'data'}",
                               f"--web.listen-address=127.0.0.1:{port}"])
    # a process tree, as torchrun and its workers are
    procs.start("tree", ["bash", "-c", "sleep 300 & sleep 300 & wait"])
    harness.wait_until("prometheus", lambda: harness.get(f"http://127.0.0.1:{port}/-/ready"), 60)
    print(" ".join(str(p.pid) for p in procs.procs.values()), flush=True)
    sys.stdin.readline()  # the test has seen them running
    if sys.argv[2] == "fail":
        raise RuntimeError("a failing test")
    time.sleep(300)
""")


def alive(pgid: int) -> list[int]:
    """Processes of a process group that are still running (zombies excluded)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


HOW = {"a test that raises": "fail", "the test process killed with SIGKILL": "kill"}


@pytest.mark.parametrize("how", list(HOW.values()), ids=list(HOW))
def test_no_process_survives(tmp_path, how):
    (tmp_path / "p.yml").write_text("global: {scrape_interval: 1m}\n")
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(tmp_path), how], cwd=harness.ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True,
                            start_new_session=True)
    try:
        line = proc.stdout.readline()
        groups = [int(p) for p in line.split()]
        assert len(groups) == 2, line + proc.stderr.read()
        assert all(alive(g) for g in groups)
        assert len(alive(groups[1])) == 3  # bash and its two sleeps
        if how == "kill":
            os.kill(proc.pid, signal.SIGKILL)
        else:
            proc.stdin.write("go\n")
            proc.stdin.flush()
        proc.wait(60)
        end = time.monotonic() + 15
        while time.monotonic() < end and any(alive(g) for g in groups):
            time.sleep(0.1)
        assert not any(alive(g) for g in groups), {g: alive(g) for g in groups}
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
