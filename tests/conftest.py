import os
import shutil

import pytest


def pytest_collection_modifyitems(config, items):
    """Tests marked promtool need Debian's promtool. Locally they skip without it; under
    CI=true they run and fail, so CI never passes without having run them."""
    if shutil.which("promtool") or os.environ.get("CI") == "true":
        return
    skip = pytest.mark.skip(reason="promtool not installed: apt-get install prometheus")
    for item in items:
        if "promtool" in item.keywords:
            item.add_marker(skip)
