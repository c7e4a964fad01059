"""The guides' code as a user pastes it: it parses, and it calls only what exists."""
from __future__ import annotations

import ast
import re
from pathlib import Path

from obsgen.instrument.core import Telemetry

ROOT = Path(__file__).resolve().parent.parent
MEGATRON = ROOT / "docs" / "guides" / "megatron.md"


def blocks(page: Path, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", page.read_text(), flags=re.S)


def test_the_megatron_block_parses_and_calls_only_the_instruments_api():
    (code,) = blocks(MEGATRON, "python")
    tree = ast.parse(code)
    called = {n.func.attr for n in ast.walk(tree)
              if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
              and isinstance(n.func.value, ast.Name) and n.func.value.id == "tel"}
    on_torch = {n.func.attr for n in ast.walk(tree)
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and isinstance(n.func.value, ast.Attribute) and n.func.value.attr == "torch"}
    assert called >= {"step", "compute", "loss", "grad_norm"}
    assert all(callable(getattr(Telemetry, m, None)) for m in called), called
    source = (ROOT / "obsgen" / "instrument" / "torch_hooks.py").read_text()
    assert on_torch == {"mesh_from_megatron", "patch_distributed", "use_cuda_events"}
    assert all(f"    def {m}(" in source for m in on_torch)
    # the four Megatron functions it wraps, by the names Megatron calls them
    wrapped = re.findall(r'obsgen_wrap\(obsgen_\w+, "(\w+)"', code)
    assert wrapped == ["train_step", "save_checkpoint_and_time", "forward_step", "backward_step"]


def test_the_megatron_starter_is_the_guides_config():
    from obsgen.cli import starter
    text = starter("megatron")
    for line in blocks(MEGATRON, "yaml")[0].splitlines():
        assert line.split("#")[0].strip() in text, line
