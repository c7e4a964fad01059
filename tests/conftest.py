import os
import shutil
from pathlib import Path

import pytest

# Grafana's dashboard schemas live beside the repository (CI clones main with ../shared
# next to it); every render in the tests validates dashboards against them. A git worktree
# sits one level deeper, so look beside its parent too (as tests/test_dashboards.py does).
ROOT = Path(__file__).resolve().parent.parent
CANDIDATES = [d / "shared" / "schemas" / "grafana" for d in (ROOT.parent, ROOT.parent.parent)]
SCHEMAS = next((d for d in CANDIDATES if (d / "dashboard.jsonschema.json").exists()), CANDIDATES[0])


def pytest_configure(config):
    if (SCHEMAS / "dashboard.jsonschema.json").exists():
        os.environ.setdefault("OBSGEN_GRAFANA_SCHEMAS", str(SCHEMAS))
    elif os.environ.get("CI") == "true" and not os.environ.get("OBSGEN_GRAFANA_SCHEMAS"):
        raise pytest.UsageError(f"Grafana schemas not found at {SCHEMAS}: CI needs ../shared")

# marker -> the Debian tool the marked tests run
TOOLS = {"promtool": "promtool", "vmalert": "vmalert", "amtool": "amtool"}


def pytest_collection_modifyitems(config, items):
    """Tests marked with a tool need it (Debian's prometheus, victoria-metrics, prometheus-alertmanager packages).
    Locally they skip without it; under CI=true they run and fail, so CI never passes
    without having run them."""
    if os.environ.get("CI") == "true":
        return
    for marker, tool in TOOLS.items():
        if shutil.which(tool):
            continue
        skip = pytest.mark.skip(reason=f"{tool} not installed: make tools")
        for item in items:
            if marker in item.keywords:
                item.add_marker(skip)
