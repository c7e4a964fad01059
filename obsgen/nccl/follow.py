"""Follow the Inspector's dump directory: new files, appended lines, rotation, restarts.

A file is known by its identity (device, inode), not its name, so a file renamed by
log rotation is read to its end under its new name while a new file at the old name is
read from its start. Only names matching the patterns (``*.log``, ``*.jsonl``) start a
new file: the copy that ``copytruncate`` rotation leaves (``x.log.1``) has content
already read and is ignored.

* A line is complete at its newline. A last line without one (cut mid-write) is left
  unread and retried at the next poll; if its file is truncated or removed before the
  line is finished, it is reported as a cut-off line (a parse error).
* Truncation (the size drops below the read offset, or the file's first bytes change):
  the file is read again from its start. After ``copytruncate`` the Inspector (which
  opened its file without O_APPEND) keeps writing at its old offset, so the new content
  starts with a run of NUL bytes; those are skipped.
* Offsets (identity, name, offset, the file's first bytes as a fingerprint) are
  ``state()`` and ``restore()``; a restarted reader continues exactly after the last
  line it returned before the state was taken, and reads a file whose inode was reused
  by another file (fingerprint differs) from its start.
* A file that disappeared is read to its end through its open descriptor, then closed.
* Each poll reads at most ``chunk`` bytes per file, round-robin, so a backlog of several
  ranks' files is read at a similar pace and their records can still be aligned.
"""
from __future__ import annotations

import fnmatch
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

log = logging.getLogger("obsgen.nccl")
FINGERPRINT = 64  # bytes at the start of a file that identify its content
MAX_LINE = 1 << 20  # a "line" longer than this is not an Inspector record


@dataclass
class _File:
    ident: tuple[int, int]
    path: str
    fh: object  # binary file object
    offset: int = 0  # start of the first unread line
    fingerprint: bytes = b""
    present: bool = True
    seen_at_scan: bool = True
    unfinished: bool = False  # bytes after the offset that do not end in a newline yet


class Follower:
    def __init__(self, directory: str | os.PathLike, patterns: tuple[str, ...] = ("*.log", "*.jsonl"),
                 chunk: int = 1 << 20):
        self.directory = Path(directory)
        self.patterns = patterns
        self.chunk = chunk
        self.files: dict[tuple[int, int], _File] = {}
        self._restored: dict[tuple[int, int], dict] = {}
        self.cut_lines = 0  # cut-off lines dropped since the last take_cut_lines()
        self.problem: OSError | None = None  # why the directory could not be listed

    # state ------------------------------------------------------------------------
    def state(self) -> list[dict]:
        return [{"dev": f.ident[0], "ino": f.ident[1], "path": f.path, "offset": f.offset,
                 "fingerprint": f.fingerprint.hex()} for f in self.files.values()]

    def restore(self, saved: list[dict]) -> None:
        """Offsets from ``state()`` of an earlier run, applied as the files are found."""
        self._restored = {(int(s["dev"]), int(s["ino"])): s for s in saved}

    def take_cut_lines(self) -> int:
        n, self.cut_lines = self.cut_lines, 0
        return n

    # scanning ---------------------------------------------------------------------
    def _matches(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, p) for p in self.patterns)

    def scan(self) -> None:
        for f in self.files.values():
            f.seen_at_scan = False
        try:
            entries = list(os.scandir(self.directory))
            self.problem = None
        except FileNotFoundError:
            entries = []  # the job has not created it yet
        except OSError as exc:  # replaced by a file, permissions taken away: wait for it
            entries = []
            if self.problem is None:
                log.warning("%s: cannot list the dump directory (%s); retrying at each poll",
                            self.directory, exc.strerror or exc)
            self.problem = exc
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if not entry.is_file(follow_symlinks=False):
                continue
            ident = (st.st_dev, st.st_ino)
            known = self.files.get(ident)
            if known is not None:
                known.path, known.seen_at_scan = entry.path, True
                continue
            if not self._matches(entry.name):
                continue
            try:
                fh = open(entry.path, "rb")
            except OSError:
                continue
            f = _File(ident, entry.path, fh)
            saved = self._restored.pop(ident, None)
            if saved is not None:
                head = fh.read(len(bytes.fromhex(saved["fingerprint"])))
                if head == bytes.fromhex(saved["fingerprint"]):
                    f.offset, f.fingerprint = int(saved["offset"]), head
            self.files[ident] = f
        for f in self.files.values():
            f.present = f.seen_at_scan

    # reading ----------------------------------------------------------------------
    def _truncated(self, f: _File, size: int) -> bool:
        if size < f.offset:
            return True
        if f.fingerprint:
            f.fh.seek(0)
            return f.fh.read(len(f.fingerprint)) != f.fingerprint
        return False

    def _read(self, f: _File) -> list[bytes]:
        size = os.fstat(f.fh.fileno()).st_size
        if self._truncated(f, size):
            self.cut_lines += f.unfinished  # its rest was cut away with the old content
            f.offset, f.fingerprint, f.unfinished = 0, b"", False
        if len(f.fingerprint) < FINGERPRINT and size > len(f.fingerprint):
            f.fh.seek(0)
            f.fingerprint = f.fh.read(FINGERPRINT)
        if size <= f.offset:
            return []
        f.fh.seek(f.offset)
        data = f.fh.read(min(self.chunk, size - f.offset))
        end = data.rfind(b"\n")
        if end < 0:
            if len(data) >= MAX_LINE:  # no newline in a megabyte: not a record, skip it
                self.cut_lines += 1
                f.offset += len(data)
                f.unfinished = False
            else:
                f.unfinished = bool(data.strip(b"\x00").strip())
            return []
        f.unfinished = bool(data[end + 1:].strip(b"\x00").strip())
        f.offset += end + 1
        out = []
        for line in data[:end].split(b"\n"):
            if line[:1] == b"\x00":
                line = line.lstrip(b"\x00")  # hole left by copytruncate
            if line.strip():
                out.append(line)
        return out

    def poll(self) -> Iterator[tuple[str, bytes]]:
        """Scan the directory and yield (path, line) for the new complete lines of every
        file, at most ``chunk`` bytes per file; call again until it yields nothing."""
        self.scan()
        for ident, f in list(self.files.items()):
            try:
                lines = self._read(f)
            except OSError:
                lines = []
            for line in lines:
                yield f.path, line
            if not f.present and not lines:
                # Gone from the directory and read to its end: an unfinished last line
                # will never be finished.
                self.cut_lines += f.unfinished
                f.fh.close()
                del self.files[ident]

    def close(self) -> None:
        for f in self.files.values():
            f.fh.close()
        self.files.clear()
