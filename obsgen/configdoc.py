"""The configuration reference (docs/config.md), from its one source: the comment above
each key of ``config.DEFAULTS``, the default itself, and what ``config.schema.json``
accepts. Nothing about a key is written anywhere else.
"""
from __future__ import annotations

import inspect
import json
import re
from dataclasses import dataclass
from typing import Any

from . import config

KEY = re.compile(r'^(?P<indent> *)"(?P<key>[^"]+)":')


@dataclass(frozen=True)
class Entry:
    path: tuple[str, ...]
    comment: str
    default: Any
    accepts: str


def comments() -> dict[tuple[str, ...], str]:
    """Key path -> the comment lines right above the key in DEFAULTS, joined."""
    src = inspect.getsource(config).split("DEFAULTS: dict[str, Any] = {\n", 1)[1].split("\n}\n", 1)[0]
    out, stack, above = {}, [], []
    for line in src.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            above.append(stripped.lstrip("# ").rstrip())
            continue
        m = KEY.match(line)
        if m:
            depth = len(m.group("indent")) // 4 - 1
            stack[depth:] = [m.group("key")]
            if above:
                out[tuple(stack)] = " ".join(above)
        above = []
    return out


def _resolve(node: dict, schema: dict) -> dict:
    while "$ref" in node:
        node = {**schema["$defs"][node["$ref"].rsplit("/", 1)[1]],
                **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def accepts(node: dict, schema: dict) -> str:
    """What a schema node accepts, in a few words."""
    node = _resolve(node, schema)
    if "oneOf" in node or "anyOf" in node:
        return " or ".join(accepts(n, schema) for n in node.get("oneOf") or node["anyOf"])
    if "enum" in node:
        return "one of " + ", ".join(json.dumps(v) for v in node["enum"])
    if "const" in node:
        return json.dumps(node["const"])
    if node.get("type") == "null":
        return "null"
    if "description" in node and node.get("type") != "object":
        return node["description"].removeprefix("must be ")
    kind = node.get("type", "any")
    if isinstance(kind, list):
        return " or ".join(accepts({**node, "type": k}, schema) for k in kind)
    if kind == "array" and "items" in node:
        return f"list of {accepts(node['items'], schema)}"
    bounds = [f"{op} {node[k]}" for k, op in (("minimum", ">="), ("exclusiveMinimum", ">"),
                                                 ("maximum", "<="), ("exclusiveMaximum", "<"))
              if k in node]
    if kind == "object" and "description" in node:
        return f"map: {node['description'].removeprefix('must be ')}"
    return " ".join([{"object": "map", "integer": "integer", "number": "number",
                      "string": "string", "boolean": "true or false"}.get(kind, str(kind)),
                     *bounds])


def entries() -> list[Entry]:
    """Every documented key, in DEFAULTS' order: sections' own keys under them."""
    schema = config.schema(None)
    notes = comments()
    out = []

    def walk(values: dict, node: dict, path: tuple[str, ...]) -> None:
        for key, value in values.items():
            here = (*path, key)
            child = _resolve(node, schema).get("properties", {}).get(key, {})
            sub = _resolve(child, schema)
            if isinstance(value, dict) and value and sub.get("properties"):
                out.append(Entry(here, notes.get(here, ""), None, "section"))
                walk(value, sub, here)
                continue
            out.append(Entry(here, notes.get(here, ""), value, accepts(child, schema)))

    walk(config.DEFAULTS, schema, ())
    return out


def _row(e: Entry) -> str:
    cells = [f"`{'.'.join(e.path)}`", f"`{json.dumps(e.default, ensure_ascii=False)}`",
             e.accepts, e.comment]
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def render(header: str) -> str:
    everything = entries()
    sections = {e.path[0]: e for e in everything if e.accepts == "section"}
    top = [e for e in everything if len(e.path) == 1 and e.path[0] not in sections]
    table = ["| key | default | accepts | what it does |", "|---|---|---|---|"]
    lines = [header.rstrip("\n"), "# Configuration reference", "",
             "Every key of `obsgen.yaml`: its default, what it accepts, and what it does, from",
             "the comments in `obsgen/config.py` and `obsgen/config.schema.json`. A config",
             "holds only the keys it changes; maps merge over the defaults, except the label",
             "sets of selectors, which replace them. A bad value exits 2 with one line naming",
             "the key.", "", "## Top level", "", *table, *map(_row, top)]
    for name, head in sections.items():
        lines += ["", f"## `{name}`", "", *([head.comment, ""] if head.comment else []), *table,
                  *(_row(e) for e in everything if len(e.path) > 1 and e.path[0] == name)]
    return "\n".join(lines) + "\n"
