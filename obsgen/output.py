"""Write rendered files into an output folder: all of them or none, and never a file
obsgen did not generate.

A write goes through three phases:

1. **Plan**: compare the rendered files with the folder. Unchanged files are not touched
   (no byte, no mtime). A file in the way that obsgen did not generate stops the write.
   Generated files the render no longer produces (a removed family) are stale.
2. **Stage**: every new content is written and fsynced next to its target as
   ``.<name>.obsgen-new``; every file to be replaced or removed gets a hard-linked backup
   ``.<name>.obsgen-old``. Then a journal listing all of it is written and fsynced.
3. **Commit**: with SIGINT, SIGTERM and SIGHUP held back, staged files are renamed over
   their targets and stale files removed; then the journal is deleted (the commit point)
   and the backups with it.

If the process dies between writing the journal and deleting it (SIGKILL, power loss),
the next obsgen run finds the journal and rolls back: backups return to their places,
files the interrupted write created are removed, and the folder is byte-identical to
before. Staged files of a write that died before its journal are simply deleted.
Renders into the same folder are serialised by an exclusive lock on ``.obsgen.lock``.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from .render import MARKER

MANAGED_DIRS = ("rules", "dashboards", "docs", "alertmanager")
JOURNAL = ".obsgen-journal.json"
LOCK = ".obsgen.lock"
NEW, OLD = ".obsgen-new", ".obsgen-old"
_HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class LockTimeout(RuntimeError):
    pass


def is_generated(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return MARKER.encode() in fh.read(400)
    except OSError:
        return False


@dataclass
class Plan:
    """What a write would do."""
    create: list[str] = field(default_factory=list)
    update: list[str] = field(default_factory=list)
    remove: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)  # a file we would write is not ours

    @property
    def stale(self) -> list[str]:
        return sorted(self.create + self.update + self.remove)


def _is_scratch(name: str) -> bool:
    return name.startswith(".") and (name.endswith(NEW) or name.endswith(OLD))


def plan(files: dict[str, str], out: Path) -> Plan:
    p = Plan()
    for rel, text in sorted(files.items()):
        path = out / rel
        if not path.exists():
            p.create.append(rel)
        elif path.read_bytes() == text.encode():
            p.unchanged.append(rel)
        elif not is_generated(path):
            p.foreign.append(rel)
        else:
            p.update.append(rel)
    for d in MANAGED_DIRS:
        root = out / d
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(out).as_posix()
            if (path.is_file() and rel not in files and not _is_scratch(path.name)
                    and is_generated(path)):
                p.remove.append(rel)
    return p


# Durable file operations ------------------------------------------------------------------
def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _scratch(path: Path, suffix: str) -> Path:
    return path.with_name(f".{path.name}{suffix}")


def _write_durable(path: Path, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.chmod(path, 0o644)


@contextlib.contextmanager
def _signals_held():
    """Hold back interrupting signals for the few milliseconds of a commit."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextlib.contextmanager
def locked(out: Path, timeout: float = 120.0):
    """Exclusive lock on ``out``: a second render into the same folder waits."""
    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(out / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LockTimeout(f"{out / LOCK}: another obsgen render has held the lock "
                                      f"for {timeout:.0f}s") from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # closing releases the lock


# Recovery ---------------------------------------------------------------------------------
def recover(out: Path) -> list[str]:
    """Undo a write that died mid-commit, and delete scratch files of one that died while
    staging. Returns the paths restored or removed. Call with the lock held."""
    done: list[str] = []
    journal = out / JOURNAL
    if journal.exists():
        entries = json.loads(journal.read_text())
        for rel in entries["replace"] + entries["remove"]:
            target, backup = out / rel, _scratch(out / rel, OLD)
            if backup.exists():
                os.replace(backup, target)
                done.append(rel)
        for rel in entries["create"]:
            target = out / rel
            if target.exists():
                target.unlink()
                done.append(rel)
        for d in {Path(r).parent for r in entries["replace"] + entries["remove"] + entries["create"]}:
            _fsync_dir(out / d)
        journal.unlink()
        _fsync_dir(out)
    for d in MANAGED_DIRS:
        if (out / d).is_dir():
            for path in (out / d).rglob(".*"):
                if path.is_file() and _is_scratch(path.name):
                    path.unlink()
    return done


# Write --------------------------------------------------------------------------------------
def write(files: dict[str, str], out: Path, _pause=None) -> Plan:
    """Write ``files`` under ``out`` as one transaction (see the module docstring).
    ``_pause`` is a test hook called between commit steps."""
    with locked(out):
        recover(out)
        p = plan(files, out)
        if p.foreign:
            raise FileExistsError(
                f"{out / p.foreign[0]}: exists and was not generated by obsgen; not overwriting it")
        if not p.stale:
            return p
        dirs = set()
        for rel in p.create + p.update:
            target = out / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            _write_durable(_scratch(target, NEW), files[rel].encode())
            dirs.add(target.parent)
        for rel in p.update + p.remove:
            target = out / rel
            backup = _scratch(target, OLD)
            backup.unlink(missing_ok=True)
            os.link(target, backup)
            dirs.add(target.parent)
        for d in dirs:
            _fsync_dir(d)
        if _pause:
            _pause("staged")
        journal = {"create": p.create, "replace": p.update, "remove": p.remove}
        _write_durable(out / f"{JOURNAL}.tmp", json.dumps(journal).encode())
        os.replace(out / f"{JOURNAL}.tmp", out / JOURNAL)
        _fsync_dir(out)
        with _signals_held():
            for rel in p.create + p.update:
                target = out / rel
                os.replace(_scratch(target, NEW), target)
                if _pause:
                    _pause(rel)
            for rel in p.remove:
                (out / rel).unlink()
            for d in dirs:
                _fsync_dir(d)
            (out / JOURNAL).unlink()  # the commit point
            _fsync_dir(out)
            for rel in p.update + p.remove:
                _scratch(out / rel, OLD).unlink(missing_ok=True)
        return p
