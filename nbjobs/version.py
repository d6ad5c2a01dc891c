"""The installed nbjobs's version (``nbjobs --version``, ``GET api/health``, the docs)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def package_version() -> str:
    """The installed distribution's version, or "unknown" from a bare checkout."""
    try:
        return version("nbjobs")
    except PackageNotFoundError:
        return "unknown"
