"""obsgen: alerts and dashboards for large distributed training jobs, defined in Python."""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("obsgen")
except _metadata.PackageNotFoundError:  # run from a source tree that is not installed
    __version__ = "0+unknown"
