"""The package as pip installs it: every subpackage listed, templates shipped."""
from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_subpackage_is_listed_in_pyproject():
    """pyproject lists packages explicitly (templates/ is mapped in as obsgen.templates);
    a subpackage missing from the list would work in the editable dev install and be
    absent from a real install."""
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "obsgen").rglob("__init__.py")}
    assert on_disk - {"obsgen.templates"} <= listed, on_disk - listed
    assert "obsgen.templates" in listed


def test_pins_are_exact():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] + [d for ds in project["optional-dependencies"].values() for d in ds]
    assert all("==" in d for d in deps), [d for d in deps if "==" not in d]


def test_the_grafana_schemas_are_package_data():
    """Renders validate against the schemas in obsgen/dashboards/schemas/grafana; a real
    (non-editable) install must carry them, so pyproject's package data must name them."""
    import fnmatch

    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    globs = data["obsgen.dashboards"]
    shipped = ROOT / "obsgen" / "dashboards" / "schemas" / "grafana"
    files = [p.relative_to(shipped.parent.parent).as_posix() for p in shipped.iterdir()]
    assert {"schemas/grafana/LICENSE", "schemas/grafana/README.md"} <= set(files)
    assert all(any(fnmatch.fnmatch(f, g) for g in globs) for f in files), (files, globs)
