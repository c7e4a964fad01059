"""Read a family module's docstring: the family overview and one section per alert.

Format (Markdown)::

    Title line.

    Overview paragraphs...

    ## Alert_Name

    What it means, one or more paragraphs.

    Check first:
    1. ...
    2. ...
    3. ...
"""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class AlertDoc:
    name: str
    meaning: str
    checks: tuple[str, ...]
    fires_after: str = ""  # after the fault, with the default windows (the README's column)


@dataclass(frozen=True)
class FamilyDoc:
    title: str
    overview: str
    alerts: dict[str, AlertDoc]


class DocError(ValueError):
    pass


def _paragraphs(text: str) -> str:
    """Unwrap hard-wrapped paragraphs, keep blank lines between them."""
    paras = [" ".join(l.strip() for l in p.splitlines()) for p in re.split(r"\n\s*\n", text.strip())]
    return "\n\n".join(p for p in paras if p)


def parse(module_name: str, doc: str) -> FamilyDoc:
    if not doc:
        raise DocError(f"{module_name}: no docstring")
    head, *sections = re.split(r"^## ", doc, flags=re.M)
    title, _, overview = head.strip().partition("\n")
    alerts = {}
    for section in sections:
        name, _, body = section.partition("\n")
        name = name.strip()
        meaning, sep, checks = body.partition("Check first:")
        if not sep:
            raise DocError(f"{module_name}: section {name} has no 'Check first:' list")
        items = tuple(" ".join(m.split()) for m in re.findall(r"^\d+\.\s+(.+?)(?=^\d+\.|\Z)", checks.strip(), flags=re.M | re.S))
        if len(items) != 3:
            raise DocError(f"{module_name}: section {name} lists {len(items)} checks, not 3")
        lead = "Fires after the fault, with the default windows:"
        paras = _paragraphs(meaning).split("\n\n")
        after = [p for p in paras if p.startswith(lead)]
        if len(after) != 1:
            raise DocError(f"{module_name}: section {name} needs one '{lead}' paragraph")
        alerts[name] = AlertDoc(name, "\n\n".join(p for p in paras if p not in after), items,
                                after[0][len(lead):].strip().rstrip("."))
    return FamilyDoc(title.strip(), _paragraphs(overview), alerts)
