"""Files a user hands obsgen, read so that every way they can be bad is one clear line.

Every reader of user input goes through here: the config (``obsgen.yaml`` and the
time-scaled profiles), the NCCL exporter's group maps and state file, and the paths the
commands write to. A problem raises :class:`InputError` with one line,
``<path>: <reason>``; the callers turn it into exit 2 with nothing written (the CLI) or
into one warning line and a skipped file (the exporter, which must keep running).

What is refused, and why:

- a path that does not exist, a directory, a FIFO or device (reading one could block
  or never end), a file that cannot be read;
- a file larger than the reader's limit (a config is a few kilobytes; the limit stops a
  wrong path, such as a log or a checkpoint, from being read into memory);
- bytes that are not UTF-8, and NUL bytes, with the line they are on;
- YAML nested deeper than ``MAX_DEPTH`` (the YAML and JSON parsers recurse, and would
  crash with a RecursionError), and YAML whose aliases expand to more than ``MAX_NODES``
  nodes ("billion laughs": a few lines that expand to millions of values once the
  config is validated and merged);
- YAML tags that construct objects: only the safe loader's plain types are built.
"""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import yaml

MAX_DEPTH = 64  # nesting of a YAML or JSON document (a config needs 4)
MAX_NODES = 100_000  # values a YAML document may hold once its aliases are expanded
MiB = 1 << 20


class InputError(Exception):
    """One line naming the file and the reason."""


def _size(n: int) -> str:
    return f"{n / MiB:.1f} MiB" if n >= MiB else f"{n:,} bytes"


def _os_reason(exc: OSError) -> str:
    if isinstance(exc, PermissionError):
        return "cannot be read: permission denied"
    if isinstance(exc, FileNotFoundError):
        return "does not exist"
    if isinstance(exc, IsADirectoryError):
        return "is a directory, not a file"
    if isinstance(exc, NotADirectoryError):
        return "does not exist (a part of its path is a file, not a directory)"
    return f"cannot be read: {(exc.strerror or str(exc)).lower()}"


def read_bytes(path: str | os.PathLike, *, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes."""
    try:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            raise InputError(f"{path}: is a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{path}: is not a regular file (a FIFO, socket or device)")
        if st.st_size > limit:
            raise InputError(f"{path}: is {_size(st.st_size)}; at most {_size(limit)} is read")
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)  # the file may have grown since the stat
    except OSError as exc:
        raise InputError(f"{path}: {_os_reason(exc)}") from None
    if len(data) > limit:
        raise InputError(f"{path}: is larger than {_size(limit)}; at most that is read")
    return data


def decode(data: bytes, source: str) -> str:
    """UTF-8 text without NUL bytes (a leading byte-order mark is dropped)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"{source}: line {line}: not UTF-8 text (byte 0x{data[exc.start]:02x} "
                         f"at offset {exc.start})") from None
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise InputError(f"{source}: line {line}: contains a NUL byte (not a text file)")
    return text.removeprefix("\ufeff")


def read_text(path: str | os.PathLike, *, limit: int) -> str:
    return decode(read_bytes(path, limit=limit), str(path))


def _yaml_shape(text: str, source: str, loader: type) -> None:
    """Refuse a document too deep or too large once expanded, from its event stream
    (PyYAML's parser does not recurse; its composer and constructor do)."""
    depth = 0
    sizes: dict[str, int] = {}  # anchor -> values under it, expanded
    stack: list[list] = [[None, 0]]  # open collections: [anchor, values so far]
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                line = event.start_mark.line + 1
                raise InputError(f"{source}: line {line}: nested deeper than {MAX_DEPTH} levels")
            stack.append([event.anchor, 1])
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
            anchor, n = stack.pop()
            if anchor:
                sizes[anchor] = n
        elif isinstance(event, yaml.ScalarEvent):
            n = 1
            if event.anchor:
                sizes[event.anchor] = 1
        elif isinstance(event, yaml.AliasEvent):
            n = sizes.get(event.anchor, 1)
        else:
            continue
        stack[-1][1] += n
        if stack[-1][1] > MAX_NODES or sum(s[1] for s in stack) > MAX_NODES:
            line = event.start_mark.line + 1
            raise InputError(f"{source}: line {line}: expands to more than {MAX_NODES:,} values "
                             "(aliases repeated into a bomb?)")


def load_yaml(text: str, source: str, loader: type = yaml.SafeLoader) -> Any:
    """Parse YAML with a safe loader, after the shape checks; a syntax error, or a tag
    the loader does not construct, is one line with its line number."""
    try:
        _yaml_shape(text, source, loader)
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"line {mark.line + 1}" if mark else "(top level)"
        what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        if what.startswith("could not determine a constructor for the tag"):
            tag = what.rsplit(" ", 1)[-1]
            raise InputError(f"{source}: {where}: YAML tag {tag} is refused: only plain values "
                             "(mappings, lists, strings, numbers, booleans) are read") from None
        raise InputError(f"{source}: {where}: invalid YAML: {what}") from None


def load_json(text: str, source: str) -> Any:
    """Parse JSON, refusing documents nested deeper than ``MAX_DEPTH``."""
    try:
        doc = json.loads(text)
    except RecursionError:
        raise InputError(f"{source}: nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        raise InputError(f"{source}: not JSON: {str(exc).splitlines()[0]}") from None
    if _json_depth(doc) > MAX_DEPTH:
        raise InputError(f"{source}: nested deeper than {MAX_DEPTH} levels")
    return doc


def _json_depth(doc: Any) -> int:
    """Levels of nested arrays and objects (0 for a scalar), counted up to MAX_DEPTH + 1."""
    deepest, todo = 0, [(doc, 1)]
    while todo:
        node, depth = todo.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, depth)
            if depth > MAX_DEPTH:
                break
            todo += [(v, depth + 1) for v in (node.values() if isinstance(node, dict) else node)]
    return deepest


def check_dir(path: str | os.PathLike, what: str, *, must_exist: bool = False) -> None:
    """A directory to read from: absent is fine unless ``must_exist`` (the job may not
    have created it yet); a file, or a directory that cannot be listed, is not."""
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        if must_exist:
            raise InputError(f"{path}: {what}: does not exist") from None
        return
    except OSError as exc:
        raise InputError(f"{path}: {what}: {_os_reason(exc)}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise InputError(f"{path}: {what}: is a file, not a directory")
    try:
        with os.scandir(p):
            pass
    except OSError as exc:
        raise InputError(f"{path}: {what}: cannot be listed: {_os_reason(exc)}") from None


def check_output_file(path: str | os.PathLike, what: str) -> None:
    """A file obsgen is about to write: its directory must exist and it must not be a
    directory (checked before anything is written)."""
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{path}: {what}: is a directory; give a file name")
    parent = p.parent
    if not parent.is_dir():
        why = "is a file" if parent.exists() else "does not exist"
        raise InputError(f"{path}: {what}: its directory {parent} {why}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{path}: {what}: its directory {parent} is not writable")


def check_output_dir(path: str | os.PathLike, what: str) -> None:
    """A folder obsgen writes into: absent (it is created) or a directory, and not below a
    file."""
    p = Path(path)
    for q in (p, *p.parents):
        if q.exists():
            if not q.is_dir():
                where = "is a file" if q == p else f"is below {q}, a file"
                raise InputError(f"{path}: {what}: {where}, not a directory")
            if not os.access(q, os.W_OK | os.X_OK):
                raise InputError(f"{path}: {what}: {q} is not writable")
            return
