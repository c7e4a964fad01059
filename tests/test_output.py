"""Output is all or nothing: failing, crashing and killed renders leave the previous
files byte-identical; parallel renders into one folder never interleave."""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from obsgen import output
from obsgen.cli import main
from obsgen.render import header

ROOT = Path(__file__).resolve().parent.parent


def files(version: str, n: int = 6) -> dict[str, str]:
    """A render of n generated files; ``version`` changes every file's content."""
    return {f"rules/f{i}.yaml": header("test") + f"groups: []  # {version} {i}\n" for i in range(n)}


def snapshot(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and p.name != output.LOCK}


CHILD = textwrap.dedent("""
    import signal, sys, time
    from pathlib import Path
    # A process started in the background inherits SIGINT ignored, and Python then leaves
    # it ignored: restore the default so these tests mean the same under any runner.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.path.insert(0, {root!r})
    from tests.test_output import files
    from obsgen import output
    def pause(step):
        print(step, flush=True)
        time.sleep({sleep} if step == {at!r} else 0.01)
    output.write(files({version!r}, {n}), Path({out!r}), _pause=pause)
    print("done", flush=True)
""")


def child(out: Path, version: str, sleep: float, at: str, n: int = 6) -> subprocess.Popen:
    """A render in another process that pauses ``sleep`` seconds at step ``at``."""
    code = CHILD.format(root=str(ROOT), out=str(out), version=version, sleep=sleep, n=n, at=at)
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


def wait_for(proc: subprocess.Popen, line: str) -> list[str]:
    seen = []
    while True:
        got = proc.stdout.readline().strip()
        assert got, f"child ended before {line!r}: {seen}"
        seen.append(got)
        if got == line:
            return seen


def test_a_failing_render_writes_nothing(tmp_path, capsys, monkeypatch):
    assert main(["render", "--out", str(tmp_path)]) == 0
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.rglob("*.*")}
    from obsgen import render
    original = render.rule_dict

    def broken(rule):  # a rule promtool refuses: the whole render must be refused
        d = original(rule)
        d["expr"] = d["expr"] + " +"
        return d

    monkeypatch.setattr(render, "rule_dict", broken)
    assert main(["render", "--out", str(tmp_path)]) == 2
    assert "promtool check rules failed" in capsys.readouterr().err
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.rglob("*.*")} == before


def test_a_crash_while_staging_leaves_the_previous_files(tmp_path, monkeypatch):
    output.write(files("v1"), tmp_path)
    before = snapshot(tmp_path)
    calls = {"n": 0}
    real = output._write_durable

    def crash_on_third(path, data):
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError(28, "No space left on device")
        real(path, data)

    monkeypatch.setattr(output, "_write_durable", crash_on_third)
    with pytest.raises(OSError):
        output.write(files("v2"), tmp_path)
    monkeypatch.setattr(output, "_write_durable", real)
    assert {k: v for k, v in snapshot(tmp_path).items() if not output._is_scratch(Path(k).name)} == before
    output.recover(tmp_path)
    assert snapshot(tmp_path) == before  # scratch files gone too


def test_sigkill_in_the_middle_of_a_commit_is_rolled_back_by_the_next_run(tmp_path):
    output.write(files("v1"), tmp_path)
    before = snapshot(tmp_path)
    proc = child(tmp_path, "v2", sleep=30, at="rules/f2.yaml")
    wait_for(proc, "rules/f2.yaml")  # three files renamed over, three to go
    proc.kill()
    proc.wait()
    assert (tmp_path / output.JOURNAL).exists()
    assert snapshot(tmp_path) != before  # the folder is half-written right now
    assert main(["check", "--out", str(tmp_path)]) == 1  # check rolls back, then reports
    assert snapshot(tmp_path) == before


def test_sigint_during_the_commit_is_held_until_it_completes(tmp_path):
    output.write(files("v1"), tmp_path)
    proc = child(tmp_path, "v2", sleep=1, at="rules/f1.yaml")
    wait_for(proc, "rules/f1.yaml")
    proc.send_signal(signal.SIGINT)
    proc.wait()
    assert proc.returncode != 0  # the interrupt was delivered, after the commit
    assert snapshot(tmp_path) == {k: v.encode() for k, v in files("v2").items()}


def test_sigint_before_the_commit_leaves_the_previous_files(tmp_path):
    output.write(files("v1"), tmp_path)
    before = snapshot(tmp_path)
    proc = child(tmp_path, "v2", sleep=30, at="staged")
    wait_for(proc, "staged")
    proc.send_signal(signal.SIGINT)
    proc.wait()
    output.recover(tmp_path)
    assert snapshot(tmp_path) == before


def test_parallel_renders_into_one_folder_never_interleave(tmp_path):
    output.write(files("v0"), tmp_path)
    first = child(tmp_path, "v1", sleep=1, at="staged")
    wait_for(first, "staged")
    second = child(tmp_path, "v2", sleep=0, at="")
    time.sleep(0.5)
    assert second.poll() is None  # waiting for the lock while the first commits
    wait_for(first, "done")
    wait_for(second, "done")
    assert snapshot(tmp_path) == {k: v.encode() for k, v in files("v2").items()}


def test_unchanged_render_touches_nothing(tmp_path):
    output.write(files("v1"), tmp_path)
    stamps = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*.yaml")}
    plan = output.write(files("v1"), tmp_path)
    assert plan.stale == [] and {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*.yaml")} == stamps


def test_foreign_files_survive_and_stale_generated_ones_go(tmp_path):
    output.write(files("v1", n=3), tmp_path)
    (tmp_path / "rules" / "mine.yaml").write_text("groups: []\n")
    plan = output.write(files("v1", n=2), tmp_path)
    assert plan.remove == ["rules/f2.yaml"]
    assert (tmp_path / "rules" / "mine.yaml").read_text() == "groups: []\n"
    assert not (tmp_path / "rules" / "f2.yaml").exists()
